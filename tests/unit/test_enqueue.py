"""`CeleryEnqueuer` against a real Redis: what one send costs the broker."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import redis
import structlog
from celery.utils.saferepr import saferepr

from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import CeleryEnqueuer, Unsent
from workers.fleet.celery_app import make_celery
from workers.fleet.delivery import send_run
from workers.fleet.keys import RUN_TASK, Keys, device_queue
from workers.fleet.outages import is_outage
from workers.settings import Settings
from workers.telemetry.logs import REQUEST_ID_HEADER, install_celery_hooks


def calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name: int(s["calls"]) for name, s in stats.items() if name != "cmdstat_info"}


def send(app: Any, run_id: str, device_id: str) -> None:
    """The fleet's one send (`CeleryEnqueuer` and the worker's `send_again` both use it)."""
    send_run(app, run_id, device_id)


def test_a_send_is_one_lpush_and_waits_for_no_result(redis_server: LocalRedis, client):
    """With `ignore_result` (`workers.fleet.delivery.send_run`: no result channel is
    subscribed), Celery's own send is one LPUSH onto the device's queue and nothing else, the
    first one too (`declare=[]`: no binding written): no SUBSCRIBE + UNSUBSCRIBE around it for
    a result, and no pubsub connection kept."""
    app = make_celery(Settings(redis_url=redis_server.url, key_prefix="t"))
    try:
        send(app, "warm-up", "d0")  # the connection opened
        before = calls(client)
        send(app, "first", "d1")
        for i in range(5):
            send(app, f"run-{i}", "d1")
        after = calls(client)
    finally:
        app.close()
    used = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert used == {"cmdstat_lpush": 6}
    assert client.pubsub_channels() == []
    queue = f"{Keys('t').celery}{device_queue('d1')}"
    messages = [json.loads(m) for m in client.lrange(queue, 0, -1)]
    assert [m["headers"]["task"] for m in messages] == [RUN_TASK] * 6
    assert [m["headers"]["id"] for m in messages][::-1] == ["first"] + [
        f"run-{i}" for i in range(5)
    ]


def test_the_enqueuer_sends_through_celery_with_the_request_id(redis_server: LocalRedis, client):
    """`CeleryEnqueuer.send_all` is Celery's own `send_task` (no envelope of ours): the run's
    message lands on the device's queue under the fleet's prefix, the task id is the run id,
    the body carries the run id alone, and the request id bound at the API rides along as a
    header (the fleet's `before_task_publish` hook)."""
    app = make_celery(Settings(redis_url=redis_server.url, key_prefix="t"))
    install_celery_hooks()
    structlog.contextvars.bind_contextvars(request_id="req-7")
    try:
        assert CeleryEnqueuer(app).send_all([("0123abcd", "d-2")]) == Unsent()
    finally:
        structlog.contextvars.clear_contextvars()
        app.close()
    sent = json.loads(client.rpop(Keys("t").queue("d-2")))
    assert sent["headers"]["id"] == "0123abcd"
    assert sent["headers"]["task"] == RUN_TASK
    assert sent["headers"][REQUEST_ID_HEADER] == "req-7"
    assert json.loads(base64.b64decode(sent["body"]))[0] == ["0123abcd"]


def test_a_message_shows_its_arguments_as_celery_would(redis_server: LocalRedis, client):
    """`send_run` gives Celery the arguments' text for logs and events (`argsrepr`,
    `kwargsrepr`), sparing it `saferepr`: the same text `saferepr` makes."""
    app = make_celery(Settings(redis_url=redis_server.url, key_prefix="t"))
    try:
        send(app, "0123abcd", "d-3")
    finally:
        app.close()
    sent = json.loads(client.rpop(Keys("t").queue("d-3")))
    assert sent["headers"]["argsrepr"] == saferepr(["0123abcd"])
    assert sent["headers"]["kwargsrepr"] == saferepr({})


def test_a_pass_sends_on_one_held_connection_and_an_outage_stops_the_rest():
    """`send_all` holds one producer for its sends: a pass of 20 messages is 20 LPUSHes on one
    connection Redis sees, not a pool checkout each. With Redis gone, the first refused send
    stops the pass: every pair comes back unsent with the outage, in order, and the pass does
    not wait out Celery's retries once per message."""
    with LocalRedis() as server:
        admin = redis.Redis.from_url(server.url)
        app = make_celery(Settings(redis_url=server.url, key_prefix="t"))
        enqueuer = CeleryEnqueuer(app)
        try:
            pairs = [(f"run-{i}", f"d{i % 4}") for i in range(20)]
            before = calls(admin)
            assert enqueuer.send_all(pairs) == Unsent()
            used = {k: v - before.get(k, 0) for k, v in calls(admin).items()}
            assert used.get("cmdstat_lpush") == 20
            clients = [c for c in admin.client_list() if c["cmd"] == "lpush"]
            assert len(clients) == 1, clients
            got = sorted(
                json.loads(m)["headers"]["id"]
                for d in range(4)
                for m in admin.lrange(f"{Keys('t').celery}{device_queue(f'd{d}')}", 0, -1)
            )
            assert got == sorted(r for r, _ in pairs)
            admin.close()
            server.stop()
            t0 = time.monotonic()
            unsent = enqueuer.send_all(pairs[:5])
            took = time.monotonic() - t0
        finally:
            app.close()
    assert unsent.pairs == pairs[:5]
    assert is_outage(unsent.error), unsent.error
    assert took < 5, took


def test_the_message_is_the_one_send_task_sends(redis_server: LocalRedis, client):
    """`send_run` makes and publishes the message with the two calls `send_task` makes
    (`app.amqp`): its headers, body and content are `send_task`'s to the byte, and of its
    properties only what a Celery result needs (`reply_to`) and the message's own delivery
    tag differ (and the repeat of `argsrepr`/`kwargsrepr` that `send_task` also leaves in the
    properties)."""
    app = make_celery(Settings(redis_url=redis_server.url, key_prefix="t"))
    try:
        send(app, "0123abcd", "mine")
        app.send_task(
            RUN_TASK,
            args=["0123abcd"],
            argsrepr=repr(["0123abcd"]),
            kwargsrepr="{}",
            queue=device_queue("celerys"),
            task_id="0123abcd",
            ignore_result=True,
        )
    finally:
        app.close()
    mine = json.loads(client.rpop(Keys("t").queue("mine")))
    theirs = json.loads(client.rpop(Keys("t").queue("celerys")))
    for key in ("body", "content-encoding", "content-type"):
        assert mine[key] == theirs[key], key
    origin = theirs["headers"].pop("origin")
    assert mine["headers"].pop("origin") == origin
    assert mine["headers"] == theirs["headers"]
    ours, celerys = mine["properties"], theirs["properties"]
    assert ours.pop("delivery_tag") != celerys.pop("delivery_tag")
    assert ours.pop("reply_to") == ""
    assert celerys.pop("reply_to")
    assert (celerys.pop("argsrepr"), celerys.pop("kwargsrepr")) == (repr(["0123abcd"]), "{}")
    assert ours["delivery_info"].pop("routing_key") == "device.mine"
    assert celerys["delivery_info"].pop("routing_key") == "device.celerys"
    assert ours == celerys
