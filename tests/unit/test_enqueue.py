"""`CeleryEnqueuer` against a real Redis: what one send costs the broker."""

from __future__ import annotations

import base64
import json
from typing import Any

import redis
import structlog

from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import CeleryEnqueuer
from workers.fleet.celery_app import make_celery
from workers.fleet.keys import RUN_TASK, Keys, device_queue
from workers.settings import Settings
from workers.telemetry.logs import REQUEST_ID_HEADER, install_celery_hooks


def calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name: int(s["calls"]) for name, s in stats.items() if name != "cmdstat_info"}


def send(app: Any, run_id: str, device_id: str) -> None:
    """What Celery itself sends for the run task with the options `CeleryEnqueuer` builds
    its messages with."""
    app.send_task(
        RUN_TASK, args=[run_id], queue=device_queue(device_id), task_id=run_id, ignore_result=True
    )


def test_a_send_is_one_lpush_and_waits_for_no_result(redis_server: LocalRedis, client):
    """With `ignore_result` (the option the scripted message is built with: its reply-to is
    the app's, and no result channel is subscribed), Celery's own send is one LPUSH onto the
    device's queue and nothing else, warm (after the first send declared the queue): no
    SUBSCRIBE + UNSUBSCRIBE around it for a result, and no pubsub connection kept."""
    app = make_celery(Settings(redis_url=redis_server.url, key_prefix="t"))
    try:
        send(app, "warm-up", "d1")
        before = calls(client)
        for i in range(5):
            send(app, f"run-{i}", "d1")
        after = calls(client)
    finally:
        app.close()
    used = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert used == {"cmdstat_lpush": 5}
    assert client.pubsub_channels() == []
    queue = f"{Keys('t').celery}{device_queue('d1')}"
    messages = [json.loads(m) for m in client.lrange(queue, 0, -1)]
    assert [m["headers"]["task"] for m in messages] == [RUN_TASK] * 6
    assert [m["headers"]["id"] for m in messages][::-1] == ["warm-up"] + [
        f"run-{i}" for i in range(5)
    ]


def test_the_scripted_message_is_the_one_send_task_pushes(redis_server: LocalRedis, client):
    """`message` builds, without sending, what Celery's `send_task` pushes: the
    same list, the same envelope, headers and body, field for field, but for the delivery
    tag (a fresh one each) — the request id header included when a request id is bound."""
    app = make_celery(Settings(redis_url=redis_server.url, key_prefix="t"))
    enqueuer = CeleryEnqueuer(app)
    install_celery_hooks()
    structlog.contextvars.bind_contextvars(request_id="req-7")
    try:
        send(app, "0123abcd", "d-2")
        built = enqueuer.message("0123abcd", "d-2")
    finally:
        structlog.contextvars.clear_contextvars()
        app.close()
    assert built.key == Keys("t").queue("d-2")
    sent = json.loads(client.rpop(built.key))
    ours = json.loads(built.payload)
    tags = {m["properties"].pop("delivery_tag") for m in (sent, ours)}
    assert len(tags) == 2
    assert ours == sent
    assert ours["headers"][REQUEST_ID_HEADER] == "req-7"
    assert json.loads(base64.b64decode(ours["body"]))[0] == ["0123abcd"]
