"""The scheduler's loop through a Redis outage: one warning when Redis goes, one line when it
is back, and no traceback per pass in between (it used to log one every second)."""

from __future__ import annotations

import threading
import time

from structlog.testing import capture_logs

from scheduler.dispatcher import Dispatcher
from scheduler.enqueue import RecordingEnqueuer
from scheduler.local.redis import LocalRedis
from scheduler.store import FleetStore
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys


def test_an_outage_is_two_lines_not_a_traceback_a_pass(redis_binary: str) -> None:
    with LocalRedis(binary=redis_binary) as server:
        client = redis_client(server.url, timeout_s=0.5)
        store = FleetStore(client, Keys("outage"), retention_s=60)
        dispatcher = Dispatcher(store, RecordingEnqueuer(), orphan_after_s=60)
        stop = threading.Event()
        with capture_logs() as logs:
            loop = threading.Thread(
                target=dispatcher.loop, args=(stop,), kwargs={"interval_s": 0.05}
            )
            loop.start()
            time.sleep(0.3)
            server.kill()
            time.sleep(1.0)  # some twenty passes while Redis is gone
            server.start()
            time.sleep(0.5)
            stop.set()
            loop.join(timeout=5)
        client.close()
    events = [e["event"] for e in logs]
    assert events.count("redis_unreachable") == 1, logs
    assert events.count("redis_reachable_again") == 1, logs
    assert "dispatch_pass_failed" not in events
    assert events.index("redis_unreachable") < events.index("redis_reachable_again")
