"""Placement without head-of-line blocking, and the `unplaceable` expiry (issue 16 point 3),
against a real redis-server with the recording enqueuer (no Celery worker involved)."""

from __future__ import annotations

import time

import pytest
import redis
from storekit import finish, loaded, register

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.dispatch.placement import Placement
from scheduler.service.fleet import Fleet
from scheduler.service.requests import BatchSubmit, RunSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore, PendingFacts
from workers.core.model import RunResult, RunStatus
from workers.core.records import RunRecord, Selector
from workers.fleet.keys import Keys
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure

FLOOD = 1500  # more than one page of the pending index (1,000)
Parts = tuple[FleetStore, RunStore, RecordingEnqueuer, Fleet]


@pytest.fixture
def parts(client: redis.Redis) -> Parts:
    keys = Keys("hol")
    store = FleetStore(client, keys, retention_s=3600)
    enq = RecordingEnqueuer(client, keys)
    fleet = Fleet(store, Dispatcher(store, enq), max_pending=10_000)
    return store, RunStore(client, keys), enq, fleet


def flood(fleet: Fleet, store: FleetStore, n: int) -> None:
    """`n` pending runs for a pool whose only device then leaves for good."""
    holder = register(store, "gone", pool="gone")
    busy, _ = fleet.submit_run(RunSubmit(goal="hold", device="gone"))
    for _ in range(n // 1000):
        fleet.submit_batch(
            BatchSubmit(goal="stuck", selector={"labels": {"pool": "gone"}}, count=1000)
        )
    if n % 1000:
        fleet.submit_batch(
            BatchSubmit(goal="stuck", selector={"labels": {"pool": "gone"}}, count=n % 1000)
        )
    fleet.store.cancel(busy.id)
    assert store.registry.deregister("gone", holder, keep_s=60)


def test_a_flood_of_unplaceable_runs_does_not_hold_back_a_placeable_one(parts: Parts) -> None:
    """1,500 runs for a dead pool sit ahead of a run an idle device can take: the next pass
    sends the placeable run (the old dispatcher looked at the first 1,000 pending only)."""
    store, rs, enq, fleet = parts
    register(store, "d1", pool="live")
    first, _ = fleet.submit_run(RunSubmit(goal="a", selector={"labels": {"pool": "live"}}))
    assert enq.sent == [(first.id, "d1")]
    flood(fleet, store, FLOOD)
    later, _ = fleet.submit_run(RunSubmit(goal="b", selector={"labels": {"pool": "live"}}))
    assert loaded(store, later.id).device is None  # d1 is busy
    finish(store, rs, first.id, "d1")
    assert fleet.dispatcher.dispatch() == 1
    assert enq.sent[-1] == (later.id, "d1")
    assert store.pending_count() == FLOOD


def test_priority_and_submit_order_hold_within_a_class(parts: Parts) -> None:
    store, rs, enq, fleet = parts
    register(store, "d1")
    hold, _ = fleet.submit_run(RunSubmit(goal="hold"))
    low, _ = fleet.submit_run(RunSubmit(goal="low", priority=5))
    high, _ = fleet.submit_run(RunSubmit(goal="high", priority=1))  # 0 is the highest
    time.sleep(0.002)  # the index orders by the millisecond (`pending_score`): a later one
    low2, _ = fleet.submit_run(RunSubmit(goal="low2", priority=5))
    order: list[str] = []
    prev = hold.id
    for _ in range(3):
        finish(store, rs, prev, "d1")
        assert fleet.dispatcher.dispatch() == 1
        prev = enq.sent[-1][0]
        order.append(prev)
    assert order == [high.id, low.id, low2.id]


def test_unplaceable_runs_expire_with_a_typed_status(parts: Parts, client: redis.Redis) -> None:
    """Runs whose selector matches no registered device end `unplaceable` after the wait;
    a run whose device is registered but busy waits on; the batch counts the ended runs."""
    store, _, enq, fleet = parts
    register(store, "d1")
    busy, _ = fleet.submit_run(RunSubmit(goal="busy", device="d1"))
    waiting, _ = fleet.submit_run(RunSubmit(goal="waits", device="d1"))
    flood(fleet, store, 5)
    d = Dispatcher(store, enq, unplaceable_after_s=50)
    assert d.sweep(now=time.time() + 10) == 0
    assert d.sweep(now=time.time() + 100) == 5
    assert store.pending_ids() == [waiting.id]
    batches = client.keys("hol:batch:*")
    counts = [client.hgetall(b) for b in batches if client.type(b) == "hash"]
    assert any(c.get("n:unplaceable") == "5" for c in counts)
    members = [str(m) for b in batches if client.type(b) == "list" for m in client.lrange(b, 0, -1)]
    ended = store.load_many(members)
    assert len(ended) == 5
    assert all(r.status is RunStatus.UNPLACEABLE for r in ended)
    assert all(r.result is not None and "no registered device" in r.result.reason for r in ended)
    assert loaded(store, busy.id).status is RunStatus.QUEUED


class Reads(FleetStore):
    """The store, recording how many ids each read of the pending index asked for."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        super().__init__(client, keys, retention_s=3600)
        self.pages: list[int] = []

    def pending_page(
        self, limit: int, *, after: tuple[str, float] | None
    ) -> list[tuple[str, float]]:
        self.pages.append(limit)
        return super().pending_page(limit, after=after)


def test_a_pass_that_places_the_head_of_a_backlog_reads_one_short_page(
    client: redis.Redis,
) -> None:
    """A device frees with 600 runs waiting that it can take: the pass reads the first
    `FIRST_PAGE` ids, places the first, and stops (it read the whole index every pass, 600
    ids for one run). A flood walked to its end is the test above."""
    from scheduler.dispatch.placement import FIRST_PAGE  # noqa: PLC0415 - this test's

    store = Reads(client, Keys("page"))
    enq = RecordingEnqueuer(client, Keys("page"))
    fleet = Fleet(store, Dispatcher(store, enq), max_pending=10_000)
    rs = RunStore(client, Keys("page"))
    register(store, "d1")
    busy, _ = fleet.submit_run(RunSubmit(goal="busy", device="d1"))
    batch, _ = fleet.submit_batch(BatchSubmit(goal="g", count=600))
    finish(store, rs, busy.id, "d1")
    store.pages.clear()
    assert fleet.dispatcher.dispatch() == 1
    assert store.pages == [FIRST_PAGE]
    run_id, device = enq.sent[-1]
    assert (run_id in batch.runs, device) == (True, "d1")
    store.pages.clear()
    assert fleet.dispatcher.dispatch() == 0  # d1 is busy: nothing idle, nothing read
    assert sum(store.pages) == 0


def _quarantine(store: FleetStore, rs: RunStore, fleet: Fleet, did: str, why: str) -> None:
    """`did` quarantined (one errored run that was its fault), its probe failing with `why`
    (nothing wakes the scheduler's view of it)."""
    run, _ = fleet.submit_run(RunSubmit(goal="breaks it", device=did))
    claim = rs.claim(run.id, did, f"w@{did}", cap=3)
    failed = RunResult(status=RunStatus.ERRORED, goal="g", reason="the app died")
    assert rs.finish(
        loaded(store, run.id), claim.token, failed,
        failure=Failure.INFRA, quarantine_after=1, retention_s=60,
    )  # fmt: skip
    assert store.registry.probe_failed(did, why)


def test_a_run_for_a_down_device_ends_after_its_device_wait_saying_why(
    parts: Parts, client: redis.Redis
) -> None:
    """`device_wait_s` bounds how long a run waits for a device that is down: past it, a run
    whose every matching device is quarantined ends `unplaceable` with the device's reason as
    it is now (not as the dispatcher's view last read it); a run without the bound waits on,
    and one whose device is only busy waits on too."""
    store, rs, enq, fleet = parts
    register(store, "d1")
    register(store, "d2")
    _quarantine(store, rs, fleet, "d1", "the app '/bin/true' exited with 0")
    bounded, _ = fleet.submit_run(RunSubmit(goal="a", device="d1", device_wait_s=30))
    unbounded, _ = fleet.submit_run(RunSubmit(goal="b", device="d1"))
    fleet.submit_run(RunSubmit(goal="holds d2", device="d2"))
    behind_busy, _ = fleet.submit_run(RunSubmit(goal="c", device="d2", device_wait_s=30))
    d = Dispatcher(store, enq, unplaceable_after_s=600, view_max_age_s=3600)
    assert d.sweep(now=time.time() + 10) == 0  # the view has read the devices
    assert store.registry.probe_failed("d1", "the app '/bin/false' exited with 1")  # unwoken
    assert d.sweep(now=time.time() + 40) == 1
    ended = loaded(store, bounded.id)
    assert ended.status is RunStatus.UNPLACEABLE
    assert ended.result is not None
    assert ended.result.reason == (
        "waited 30 s (device_wait_s) for device d1: quarantined, down: the probe failed: "
        "the app '/bin/false' exited with 1"
    )
    assert set(store.pending_ids()) == {unbounded.id, behind_busy.id}


def test_why_a_run_waits_names_its_devices_states(parts: Parts) -> None:
    """What `goalfleet status` says of a queued run: its device's state and reason."""
    from scheduler.dispatch.routing import waiting_for  # noqa: PLC0415 - this test's

    store, rs, _, fleet = parts
    register(store, "d1", pool="p")
    register(store, "d2", pool="p")
    _quarantine(store, rs, fleet, "d1", "the app '/bin/false' exited with 1")
    devices = store.registry.devices()
    assert waiting_for(devices, "d1", None) == (
        "device d1: quarantined, down: the probe failed: the app '/bin/false' exited with 1"
    )
    assert waiting_for(devices, "gone", None) == "no registered device matches"
    sel = Selector(labels={"pool": "p"})
    assert waiting_for(devices, None, sel) == ""  # d2 is idle: it is about to be placed
    fleet.submit_run(RunSubmit(goal="holds d2", device="d2"))
    devices = store.registry.devices()
    assert waiting_for(devices, None, sel).startswith("2 matching devices, none free: d1: quar")


class Vanishing(FleetStore):
    """The store, with the first run of each read of placement facts gone right after it was
    read (out of the pending index, its record deleted): a run cancelled and expired between
    the pass's two reads."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        super().__init__(client, keys, retention_s=3600)
        self.loaded: list[int] = []

    def pending_facts(self, run_ids: list[str]) -> list[PendingFacts]:
        facts = super().pending_facts(run_ids)
        if facts:
            self.r.zrem(self.k.pending, facts[0].run_id)
            self.r.delete(self.k.run(facts[0].run_id))
        return facts

    def load_many(self, run_ids: list[str]) -> list[RunRecord]:
        self.loaded.append(len(run_ids))
        return super().load_many(run_ids)


def test_a_pass_loads_one_record_a_class_and_survives_its_example_vanishing(
    client: redis.Redis,
) -> None:
    """A pass reads only what placement needs of 300 new runs (`pending_facts`) and loads one
    whole record for their one class, to match devices against; when that run is gone
    before its load, the next run of the class is loaded instead, and the class is still
    placed (it was never placed again: no example, no match). The pass that read the gone
    run's id chooses it and has its reservation refused; the next pass places another."""
    keys = Keys("facts")
    store = Vanishing(client, keys)
    enq = RecordingEnqueuer(client, keys)
    fleet = Fleet(store, Dispatcher(store, enq), max_pending=10_000)
    rs = RunStore(client, keys)
    register(store, "d1", pool="p")
    busy, _ = fleet.submit_run(RunSubmit(goal="busy", device="d1"))
    batch, _ = fleet.submit_batch(
        BatchSubmit(goal="g", selector={"labels": {"pool": "p"}}, count=300, device_wait_s=60)
    )
    finish(store, rs, busy.id, "d1")
    store.loaded.clear()
    first = fleet.dispatcher.dispatch()
    assert store.loaded == [1, 1]  # the vanished first run, then the next: one record each
    assert first + fleet.dispatcher.dispatch() == 1
    assert store.loaded == [1, 1]
    run_id, device = enq.sent[-1]
    assert (run_id in batch.runs[1:], device) == (True, "d1")


def test_placement_facts_read_a_batch_runs_wait_from_its_batch(
    parts: Parts, client: redis.Redis
) -> None:
    """A batch stores its request once, on the batch: its runs' `device_wait_s` comes from
    there; a single run's from its own record; a run gone is left out."""
    store, _, _, fleet = parts
    register(store, "dq", pool="q")
    fleet.submit_run(RunSubmit(goal="holds dq", device="dq"))
    pool = {"labels": {"pool": "q"}}
    batch, _ = fleet.submit_batch(BatchSubmit(goal="g", selector=pool, count=2, device_wait_s=45))
    ios = {"platform": "ios", "labels": {"pool": "q"}}
    run, _ = fleet.submit_run(RunSubmit(goal="one", selector=ios))
    one, _ = fleet.submit_run(RunSubmit(goal="two", device="dq", device_wait_s=30))
    facts = store.pending_facts([*batch.runs, "gone", run.id, one.id])
    assert [(f.run_id, f.target, f.device_wait_s) for f in facts] == [
        (batch.runs[0], None, 45.0),
        (batch.runs[1], None, 45.0),
        (run.id, None, None),
        (one.id, "dq", 30.0),
    ]
    assert facts[0].selector == Selector(labels={"pool": "q"}).model_dump_json()
    assert facts[2].selector == Selector.model_validate(ios).model_dump_json()


class Reserving(FleetStore):
    """The store, with another scheduler at work between a pass's page reads: after each page,
    every other run of it leaves the index (reserved elsewhere)."""

    def pending_facts(self, run_ids: list[str]) -> list[PendingFacts]:
        if run_ids:
            self.r.zrem(self.k.pending, *run_ids[::2])
        return super().pending_facts(run_ids)


def test_a_pass_reads_every_pending_run_while_another_scheduler_takes_some(
    client: redis.Redis,
) -> None:
    """Runs another scheduler reserves while a pass walks the pending index (here half of
    each page, at once) skip nothing the pass has not read: the next page starts after the
    last entry read, not at an offset the removals shifted. By offset, each page after the
    first started past runs never read, and in two schedulers' burst those went to the other's
    second walk: ~1,400 refused reservations each in 4,000 placements (docs/benchmarks.md §24)."""
    keys = Keys("cursor")
    store = Reserving(client, keys, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, RecordingEnqueuer(client, keys)), max_pending=10_000)
    register(store, "busy", pool="q")
    fleet.submit_run(RunSubmit(goal="holds it", device="busy"))
    batches = [fleet.submit_batch(BatchSubmit(goal="g", selector={"labels": {"pool": "q"}},
                                              count=1000))[0] for _ in range(2)]  # fmt: skip
    want = [r for b in batches for r in b.runs]
    order = [rid for rid, _ in FleetStore(client, keys, retention_s=3600).pending_page(
        3000, after=None)]  # fmt: skip
    assert sorted(order) == sorted(want)
    walked = [p.run_id for p in Placement(store).pending()]
    assert walked == order
