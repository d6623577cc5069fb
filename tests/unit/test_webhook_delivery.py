"""A webhook's event is acknowledged only once its calls are over (real Redis stream and
consumer group, a real HTTP receiver on loopback): a scheduler that stops after reading an
event leaves it pending, and another claims it once it has waited longer than its calls could
take, and calls it, with the same delivery id; an event in flight is not claimed by its own
scheduler a second time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from httpkit import HookReceiver

from scheduler.service.webhooks import GROUP, Webhooks
from scheduler.store.runs import FleetStore
from workers.core.backoff import Backoff
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest
from workers.fleet.keys import Keys

KEYS = Keys("whd")
NO_WAIT = Backoff(base_s=0.001, cap_s=0.001, jitter=0)
RUN = "c" * 32


@pytest.fixture
def receiver() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.stop()


def hooks(client: redis.Redis, url: str) -> Webhooks:
    h = Webhooks(client, KEYS, FleetStore(client, KEYS, retention_s=60), secret="k",
                 fleet_url=url, attempts=2, timeout_s=5, backoff=NO_WAIT)  # fmt: skip
    h.create_group()
    return h


def failed_run_event(client: redis.Redis) -> str:
    """A blocked run and its `run_ended` event, as the finish script leaves them."""
    run = RunRecord(id=RUN, request=GoalRunRequest(goal="Sign in"), status=RunStatus.BLOCKED,
                    submitted_at=1.0, reason="no way on")  # fmt: skip
    client.hset(KEYS.run(RUN), mapping=run.to_hash())  # type: ignore[arg-type]
    return str(client.xadd(KEYS.events, {"kind": "run_ended", "run": RUN}))


def pending(client: redis.Redis) -> int:
    return int(client.xpending(KEYS.events, GROUP)["pending"])


def wait_for(check: object, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_acknowledged_only_once_the_call_is_over(
    client: redis.Redis, receiver: HookReceiver
) -> None:
    client.delete(KEYS.events)
    h = hooks(client, f"{receiver.url}/fleet")
    event = failed_run_event(client)
    receiver.go.clear()  # the receiver holds its answer
    assert h.pump() == 1
    time.sleep(0.2)
    assert pending(client) == 1  # read, being called: not acknowledged yet
    assert h.claim(idle_s=0) == 0  # in flight here: not called a second time
    receiver.go.set()
    wait_for(lambda: pending(client) == 0)
    h.close()
    assert receiver.deliveries == [event]


def test_an_event_a_stopped_scheduler_left_is_claimed_and_called(
    client: redis.Redis, receiver: HookReceiver
) -> None:
    client.delete(KEYS.events)
    first = hooks(client, f"{receiver.url}/fleet")
    event = failed_run_event(client)
    first.pool.shutdown()  # it read the event and stopped before calling it
    with pytest.raises(RuntimeError, match="shutdown"):
        first.pump()
    assert pending(client) == 1
    second = hooks(client, f"{receiver.url}/fleet")
    assert second.claim() == 0  # not pending for longer than its calls could take yet
    time.sleep(0.1)
    assert second.claim(idle_s=0.05) == 1
    wait_for(lambda: pending(client) == 0)
    second.close()
    assert receiver.deliveries == [event]  # called once, with the event's own delivery id
    assert second.claim_idle_s > 2 * 5  # two tries of a 5 s timeout, and the margin
