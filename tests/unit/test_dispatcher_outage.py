"""The scheduler's loop through a Redis outage of every kind (gone, full, read-only): one
warning when it starts, one line when Redis answers again, passes backing off in between, and
no traceback per pass (it used to log one every second)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis
from structlog.testing import capture_logs

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.local.redis import LocalRedis, free_port
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
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
        dispatcher = Dispatcher(store, RecordingEnqueuer(), orphan_after_s=60)
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
