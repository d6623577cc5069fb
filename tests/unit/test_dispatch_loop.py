"""The scheduler's loop: a pass on every wake-up, its timers on their own clock."""

from __future__ import annotations

import itertools
import threading
import time

import redis
from storekit import finish, register

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.service.fleet import Fleet
from scheduler.service.requests import BatchSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.fleet.keys import WAKE_KEPT, Keys
from workers.fleet.state.runs import RunStore


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


def test_more_finishes_between_two_passes_than_the_wake_list_keeps_free_every_device(
    client: redis.Redis,
) -> None:
    """150 devices free between two passes, more than the wake list keeps (`WAKE_KEPT`: a
    finish trims it): what the loop learns from the drained list frees all 150 in the view
    at once, not only the 100 the list still names (the others stayed busy until the
    view's periodic re-read, here an hour away)."""
    keys = Keys("wakecap")
    store = FleetStore(client, keys, retention_s=60)
    enq = RecordingEnqueuer(client, keys)
    dispatcher = Dispatcher(store, enq, view_max_age_s=3600)
    fleet = Fleet(store, dispatcher, max_pending=1000)
    rs = RunStore(client, keys)
    n = WAKE_KEPT + 50
    for i in range(n):
        register(store, f"d{i}")
    fleet.submit_batch(BatchSubmit(goal="first", count=n))
    assert len(enq.sent) == n  # every device busy in the view
    fleet.submit_batch(BatchSubmit(goal="second", count=n))
    for run_id, device in enq.sent:
        finish(store, rs, run_id, device)
    assert client.llen(keys.wake) == WAKE_KEPT  # the trim dropped 50 finishes
    dispatcher.learn(store.wait_wake(0.01))
    assert dispatcher.dispatch() == n
