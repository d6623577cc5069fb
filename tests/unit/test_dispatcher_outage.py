"""The scheduler's loop through a Redis outage of every kind (gone, full, read-only): one
warning when it starts, one line when Redis answers again, passes backing off in between, and
no traceback per pass (it used to log one every second)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis
from storekit import register
from structlog.testing import capture_logs

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.local.redis import LocalRedis, free_port
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys

Trouble = Callable[[LocalRedis, redis.Redis], Callable[[], object]]
"""Start an outage on the server; returns what ends it."""

pytestmark = pytest.mark.slow  # each waits out a real outage (seconds): make test, not make unit


def gone(server: LocalRedis, _admin: redis.Redis) -> Callable[[], object]:
    server.kill()
    return server.start


def full(_server: LocalRedis, admin: redis.Redis) -> Callable[[], object]:
    admin.config_set("maxmemory", 1)  # every write that needs memory is refused (noeviction)
    return lambda: admin.config_set("maxmemory", 0)


def read_only(_server: LocalRedis, admin: redis.Redis) -> Callable[[], object]:
    admin.replicaof("127.0.0.1", free_port())  # a replica of nobody: writes get READONLY
    return lambda: admin.replicaof("NO", "ONE")


@pytest.mark.parametrize("trouble", [gone, full, read_only], ids=["gone", "full", "read-only"])
def test_an_outage_is_two_lines_not_a_traceback_a_pass(redis_binary: str, trouble: Trouble) -> None:
    """Each pass writes (the tick pushes a wake-up, as schedules do), so a full or read-only
    Redis fails it just as a dead one does."""
    with LocalRedis(binary=redis_binary) as server:
        client = redis_client(server.url, timeout_s=0.5)
        keys = Keys("outage")
        store = FleetStore(client, keys, retention_s=60)
        dispatcher = Dispatcher(store, RecordingEnqueuer(client, keys), orphan_after_s=60)
        passes: list[float] = []

        def tick() -> None:
            client.rpush(f"{keys.wake}:probe", "x")
            passes.append(time.monotonic())

        stop = threading.Event()
        with capture_logs() as logs:
            loop = threading.Thread(
                target=dispatcher.loop, args=(stop,), kwargs={"interval_s": 0.05, "tick": tick}
            )
            loop.start()
            time.sleep(0.3)
            admin = redis.Redis.from_url(server.url)
            end = trouble(server, admin)
            time.sleep(1.5)  # what were thirty passes at the pass interval
            end()
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if any(e["event"] == "redis_available_again" for e in logs):
                    break
                time.sleep(0.05)
            ok_after = len(passes)
            time.sleep(0.3)
            stop.set()
            loop.join(timeout=10)
            admin.close()
        client.close()
    events = [e["event"] for e in logs]
    assert events.count("redis_unavailable") == 1, logs
    assert events.count("redis_available_again") == 1, logs
    assert "dispatch_pass_failed" not in events
    assert events.index("redis_unavailable") < events.index("redis_available_again")
    assert len(passes) > ok_after  # dispatching again at the pass interval


def test_a_reservation_refused_inside_its_script_is_an_outage(each_redis_binary: str) -> None:
    """A pass's first write is the reserve script; a full Redis refuses it inside the script
    (on Redis 6.2 a plain `Error running script ... -OOM` error, not redis-py's
    OutOfMemoryError). The pass is an outage like any other: one warning, no traceback; once
    memory frees the run is reserved and sent, once."""
    with LocalRedis(binary=each_redis_binary) as server:
        client = redis_client(server.url, timeout_s=0.5)
        keys = Keys("outage")
        store = FleetStore(client, keys, retention_s=60)
        register(store, "d1")
        run = RunRecord(id="r1", request=GoalRunRequest(goal="Sign in"), submitted_at=time.time())
        store.create([run])
        enqueuer = RecordingEnqueuer(client, keys)
        dispatcher = Dispatcher(store, enqueuer, orphan_after_s=60)
        admin = redis.Redis.from_url(server.url)
        admin.config_set("maxmemory", 1)  # full before the first pass: nothing is reserved
        stop = threading.Event()
        with capture_logs() as logs:
            loop = threading.Thread(
                target=dispatcher.loop, args=(stop,), kwargs={"interval_s": 0.05}
            )
            loop.start()
            time.sleep(1.0)
            refused_sent = list(enqueuer.sent)
            admin.config_set("maxmemory", 0)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not enqueuer.sent:
                time.sleep(0.05)
            stop.set()
            loop.join(timeout=10)
        admin.close()
        record = store.load("r1")
        sent = enqueuer.sent
        client.close()
    events = [e["event"] for e in logs]
    assert refused_sent == []
    assert "dispatch_pass_failed" not in events, logs
    assert events.count("redis_unavailable") == 1, logs
    warned = next(e["error"] for e in logs if e["event"] == "redis_unavailable")
    assert "script" in warned, warned  # refused inside the reserve script
    assert sent == [("r1", "d1")]
    assert record is not None
    assert (record.status, record.device) == (RunStatus.QUEUED, "d1")  # reserved
