"""Webhook calls through httpx's transport seam (the real client above it): signed over the
timestamp and the body, tried again on a 5xx, 408, 429 or no connection (with backoff, up to
the attempts), never on another 4xx; a run that ended well makes no call."""

from __future__ import annotations

import hashlib
import hmac

import httpx
import redis

from scheduler.service.webhooks import SIGNATURE, Webhooks
from scheduler.store.runs import FleetStore
from workers.core.backoff import Backoff
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest
from workers.fleet.keys import Keys

KEY = "unit-signing-key"
NO_WAIT = Backoff(base_s=0.001, cap_s=0.001, jitter=0)


def hooks(
    client: redis.Redis, answers: list[int | Exception], seen: list[httpx.Request]
) -> Webhooks:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer)

    keys = Keys("wh")
    store = FleetStore(client, keys, retention_s=60)
    transport = httpx.MockTransport(handler)
    return Webhooks(client, keys, store, secret=KEY, attempts=4, backoff=NO_WAIT,
                    transport=transport)  # fmt: skip


def test_retried_on_5xx_429_and_no_connection_then_signed_delivery(client: redis.Redis) -> None:
    seen: list[httpx.Request] = []
    fail = httpx.ConnectError("refused")
    h = hooks(client, [500, 429, fail, 204], seen)
    assert h.deliver("http://hook.test/x", "run.failed", "1-0", b'{"a":1}')
    assert len(seen) == 4
    for request in seen:
        parts = dict(p.split("=", 1) for p in request.headers[SIGNATURE].split(","))
        mac = hmac.new(KEY.encode(), parts["t"].encode() + b"." + request.content, hashlib.sha256)
        assert parts["v1"] == mac.hexdigest()
    h.close()


def test_another_4xx_is_not_retried_and_attempts_are_bounded(client: redis.Redis) -> None:
    seen: list[httpx.Request] = []
    h = hooks(client, [404], seen)
    assert not h.deliver("http://hook.test/x", "batch.finished", "1-0", b"{}")
    assert len(seen) == 1
    seen.clear()
    h = hooks(client, [503, 503, 503, 503, 204], seen)
    assert not h.deliver("http://hook.test/x", "batch.finished", "1-0", b"{}")
    assert len(seen) == 4
    h.close()


def test_a_run_that_ended_well_makes_no_call(client: redis.Redis) -> None:
    keys = Keys("wh")
    store = FleetStore(client, keys, retention_s=60)
    for rid, status in (("d" * 32, RunStatus.DONE), ("b" * 32, RunStatus.BLOCKED)):
        run = RunRecord(id=rid, request=GoalRunRequest(goal="Sign in", inputs={"email": "a@b.c"}),
                        status=status, submitted_at=1.0, reason="no way on")  # fmt: skip
        client.hset(keys.run(rid), mapping=run.to_hash())  # type: ignore[arg-type]
    h = Webhooks(client, keys, store, secret=KEY, fleet_url="http://hook.test/fleet")
    assert h.calls("1-0", {"kind": "run_ended", "run": "d" * 32}) == []
    ((url, event, body),) = h.calls("2-0", {"kind": "run_ended", "run": "b" * 32})
    assert (url, event) == ("http://hook.test/fleet", "run.failed")
    assert b'"failure":"decision"' in body
    assert b"a@b.c" not in body  # an input's value never goes out
    h.close()
