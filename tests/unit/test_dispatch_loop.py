"""The scheduler's loop: a pass on every wake-up, its timers on their own clock."""

from __future__ import annotations

import itertools
import threading
import time

import redis

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.fleet.keys import Keys


def test_the_timers_tick_at_most_once_an_interval_however_often_the_loop_wakes(
    client: redis.Redis,
) -> None:
    """Finishes wake the loop hundreds of times a second under load; each wake-up is a
    dispatch pass, but schedules and question deadlines (`tick`) are looked at no more often
    than an idle loop looks at them: once per `interval_s`."""
    keys = Keys("tick")
    store = FleetStore(client, keys, retention_s=60)
    dispatcher = Dispatcher(store, RecordingEnqueuer(client, keys))
    ticks: list[float] = []
    stop = threading.Event()
    loop = threading.Thread(
        target=dispatcher.loop,
        args=(stop,),
        kwargs={"interval_s": 0.25, "tick": lambda: ticks.append(time.monotonic())},
    )
    loop.start()
    wakes = 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # a wake-up every millisecond or so
        client.rpush(keys.wake, "run")
        wakes += 1
        time.sleep(0.001)
    stop.set()
    loop.join(timeout=10)
    assert wakes > 200
    assert 2 <= len(ticks) <= 6, len(ticks)  # 1 s at one tick per 0.25 s, the first at once
    assert all(b - a >= 0.25 for a, b in itertools.pairwise(ticks))
