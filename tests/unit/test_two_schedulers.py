"""Two schedulers on one Redis: both place, neither places a run twice nor a device twice (their
action logs: what each sent), and when one stops the other places everything that comes."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence

import redis

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.dispatch.shares import Shares
from scheduler.service.fleet import new_id
from scheduler.store.enqueue import Unsent
from scheduler.store.runs import FleetStore
from workers.core.model import Platform
from workers.core.records import DeviceInfo, RunRecord, Selector
from workers.core.request import GoalRunRequest
from workers.fleet.keys import Keys, lease_holder, worker_name


class Log:
    """A scheduler's action log: every (run, device) it sent, nothing consumed."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send_all(self, pairs: Sequence[tuple[str, str]]) -> Unsent:
        self.sent.extend(pairs)
        return Unsent()


def add(store: FleetStore, first: int, n: int) -> None:
    """Devices d<first>..d<first+n-1> registered idle, and n pending selector runs."""
    for i in range(first, first + n):
        info = DeviceInfo(id=f"d{i}", platform=Platform.IOS, os_version="17.5")
        store.registry.register(info, lease_holder(worker_name(f"d{i}")), lease_s=600)
    request = GoalRunRequest(goal="Sign in")
    runs = [
        RunRecord(id=new_id(), request=request, selector=Selector(), submitted_at=time.time())
        for _ in range(n)
    ]
    for run in runs:
        store.create([run])
    store.wake()


def settle(store: FleetStore) -> None:
    deadline = time.monotonic() + 30
    while store.pending_count() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_two_schedulers_share_placement_and_one_stopping_hands_its_share_over(
    client: redis.Redis,
) -> None:
    keys = Keys("two-sched")
    store = FleetStore(client, keys, retention_s=60)
    logs = [Log(), Log()]
    stops = [threading.Event(), threading.Event()]
    loops = [
        threading.Thread(
            target=Dispatcher(
                FleetStore(client, keys, retention_s=60),
                log,
                shares=Shares(client, keys.schedulers),
            ).loop,
            args=(stop,),
            kwargs={"interval_s": 0.05},
        )
        for log, stop in zip(logs, stops, strict=True)
    ]
    for loop in loops:
        loop.start()
    try:
        for wave in range(10):  # waves of 40: both loops are up and passing
            add(store, 40 * wave, 40)
            settle(store)
        assert store.pending_count() == 0
        assert all(log.sent for log in logs), [len(log.sent) for log in logs]
        stops[0].set()
        loops[0].join(timeout=10)
        before = len(logs[1].sent)
        add(store, 400, 100)  # one scheduler left: it places all of them
        settle(store)
        assert store.pending_count() == 0
        assert len(logs[1].sent) - before == 100
    finally:
        for stop in stops:
            stop.set()
        for loop in loops:
            loop.join(timeout=10)
    sent = [x for log in logs for x in log.sent]
    assert len(sent) == 500
    assert max(Counter(run for run, _ in sent).values()) == 1  # no run placed twice
    assert max(Counter(dev for _, dev in sent).values()) == 1  # no device given two runs
    for run in store.load_many([run for run, _ in sent]):
        assert run.device == dict(sent)[run.id]
