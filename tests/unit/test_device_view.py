"""The dispatcher's cached device view: a dispatch reads O(idle) devices, not every device,
and the cache is never trusted for a placement (the reservation checks Redis)."""

from __future__ import annotations

import random

import pytest
import redis
from storekit import finish, register

from scheduler.dispatch.device_view import DeviceView
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.dispatch.routing import choose
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import Platform
from workers.core.records import DeviceInfo, Selector
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.state.runs import RunStore

Parts = tuple[FleetStore, RunStore, RecordingEnqueuer, Fleet]


@pytest.fixture
def parts(client: redis.Redis) -> Parts:
    keys = Keys("dv")
    store = FleetStore(client, keys, retention_s=3600)
    enq = RecordingEnqueuer(client, keys)
    # a view that never goes stale by age: only wake-ups and misses re-read it
    fleet = Fleet(store, Dispatcher(store, enq, view_max_age_s=3600), max_pending=100)
    return store, RunStore(client, keys), enq, fleet


def test_a_freed_device_is_seen_through_the_wake_up_not_a_full_read(parts: Parts) -> None:
    store, rs, enq, fleet = parts
    register(store, "d1")
    a, _ = fleet.submit_run(RunSubmit(goal="a"))
    b, _ = fleet.submit_run(RunSubmit(goal="b"))
    assert enq.sent == [(a.id, "d1")]
    finish(store, rs, a.id, "d1")
    assert fleet.dispatcher.dispatch() == 0  # the view still has d1 busy: nothing read
    woken = store.wait_wake(0.1)
    assert a.id in woken  # the finish named its run
    fleet.dispatcher.view.touch(woken)
    assert fleet.dispatcher.dispatch() == 1
    assert enq.sent[-1] == (b.id, "d1")


def test_a_device_registered_after_the_view_was_read_is_accepted(parts: Parts) -> None:
    store, _, enq, fleet = parts
    register(store, "d1")
    fleet.submit_run(RunSubmit(goal="a"))
    register(store, "new-1", pool="new")
    run, _ = fleet.submit_run(RunSubmit(goal="b", device="new-1"))  # a miss re-reads
    assert enq.sent[-1] == (run.id, "new-1")
    run2, _ = fleet.submit_run(RunSubmit(goal="c", selector=Selector(labels={"pool": "new"})))
    assert store.load(run2.id) is not None


def test_a_stale_idle_entry_costs_a_retry_never_a_wrong_placement(
    parts: Parts, client: redis.Redis
) -> None:
    """The view says d1 is idle but its lease lapsed (its worker died): the reservation is
    refused in Redis, nothing is sent, and the view learns the truth."""
    store, _, enq, fleet = parts
    register(store, "d1")
    view = fleet.dispatcher.view
    assert [d.info.id for d in view.idle()] == ["d1"]
    client.delete(Keys("dv").lease("d1"))
    run, _ = fleet.submit_run(RunSubmit(goal="a"))
    assert enq.sent == []
    assert view.idle() == []
    assert store.pending_ids() == [run.id]


def test_view_reads_only_what_it_is_told_changed(parts: Parts, client: redis.Redis) -> None:
    store, _, _, _ = parts
    for i in range(50):
        register(store, f"d{i}")
    view = DeviceView(store.registry, max_age_s=3600)
    assert len(view.all()) == 50
    before = int(client.info("stats")["total_commands_processed"])
    view.touch(["d7"])
    used = int(client.info("stats")["total_commands_processed"]) - before - 1
    assert used == 3  # HGETALL, EXISTS, SISMEMBER of one device (the INFO excluded)
    assert view.has_match(None, Selector(platform=Platform.IOS))
    assert not view.has_match(None, Selector(labels={"pool": "none"}))


def test_a_device_that_registers_is_seen_through_the_wake_up(parts: Parts) -> None:
    store, _, _, fleet = parts
    register(store, "d1")
    view = fleet.dispatcher.view
    assert [d.info.id for d in view.all()] == ["d1"]
    register(store, "d2")
    view.touch(store.wait_wake(0.1))
    assert sorted(d.info.id for d in view.idle()) == ["d1", "d2"]


def calls(client: redis.Redis) -> dict[str, int]:
    return {k: int(v["calls"]) for k, v in client.info("commandstats").items()}


def test_a_run_for_a_device_the_view_thinks_busy_tries_the_reservation(
    parts: Parts, client: redis.Redis
) -> None:
    """The API's view is not woken by finishes: a run for an exact device the view thinks busy
    goes straight to the reservation (the script refuses a busy device), so the fast path
    places it the moment the device is free: one round trip (the submit script: the backlog
    count, the write, the reservation) and no re-read of the device first (HGETALL, EXISTS,
    SISMEMBER: one more round trip). A device still busy is refused by the same script, which
    leaves the run pending and wakes the scheduler."""
    store, rs, enq, fleet = parts
    register(store, "d1")
    a, _ = fleet.submit_run(RunSubmit(goal="a", device="d1"))
    finish(store, rs, a.id, "d1")
    before = calls(client)
    b, _ = fleet.submit_run(RunSubmit(goal="b", device="d1"))
    after = calls(client)
    used = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    assert enq.sent == [(a.id, "d1"), (b.id, "d1")]
    assert store.load(b.id).device == "d1"
    assert used["cmdstat_evalsha"] == 1
    assert "cmdstat_exec" not in used, used
    assert "cmdstat_hgetall" not in used, used  # the device was not re-read
    assert "cmdstat_sismember" not in used, used
    c, _ = fleet.submit_run(RunSubmit(goal="c", device="d1"))  # d1 is busy with b
    assert enq.sent[-1] == (b.id, "d1")
    assert store.load(c.id).device is None
    assert store.pending_ids() == [c.id]


def test_unchanged_devices_are_not_parsed_again_on_a_full_read(
    parts: Parts, client: redis.Redis
) -> None:
    store, _, _, _ = parts
    for i in range(5):
        register(store, f"d{i}")
    view = DeviceView(store.registry, max_age_s=3600)
    view.reload()
    first = {d.info.id: d for d in view.all()}
    client.hset(Keys("dv").device("d3"), "quarantined", "1")
    view.reload()
    again = {d.info.id: d for d in view.all()}
    assert all(again[f"d{i}"] is first[f"d{i}"] for i in (0, 1, 2, 4))
    assert again["d3"].quarantined
    assert "d3" not in {d.info.id for d in view.idle()}


def test_a_state_the_dispatcher_changed_is_parsed_again_by_the_next_full_read(
    parts: Parts,
) -> None:
    """The dispatcher marked d1 busy, then the reservation was undone in Redis (its record is
    byte-for-byte what the last full read saw): the next full read must not keep the busy
    state it would otherwise reuse."""
    store, _, _, _ = parts
    register(store, "d1")
    view = DeviceView(store.registry, max_age_s=3600)
    view.reload()
    (d1,) = view.idle()
    view.put(d1.model_copy(update={"run": "r-undone"}))
    assert view.idle() == []
    view.reload()
    assert [d.info.id for d in view.idle()] == ["d1"]


def test_the_idle_pick_is_the_least_loaded_match_through_every_change(parts: Parts) -> None:
    """`pick_idle` (the submit's choice of an idle device for a selector run) walks the idle
    devices in load order and stops at the first match: it equals `routing.choose` over every
    idle device (fewest runs, then id) after each kind of change the view sees — a placement
    (`put` busy), a finish (`put` idle with one more run), a device read again (`refresh`), a full
    re-read — over 300 random steps on 40 devices of two platforms and two pools."""
    store, _, _, fleet = parts
    view = fleet.dispatcher.view
    rng = random.Random(7)
    ids = [f"d{i:02}" for i in range(40)]
    selectors = [
        None,
        Selector(platform=Platform.IOS),
        Selector(platform=Platform.ANDROID, labels={"pool": "p1"}),
        Selector(labels={"pool": "p0"}),
        Selector(platform=Platform.LINUX),  # matches nothing
    ]
    for i, did in enumerate(ids):
        platform = Platform.IOS if i % 3 else Platform.ANDROID
        info = DeviceInfo(id=did, platform=platform, os_version="14", labels={"pool": f"p{i % 2}"})
        store.registry.register(info, lease_holder(worker_name(did)), lease_s=30)
    view.reload()
    assert view.pick_idle(selectors[2]) is not None  # each platform and pool is there
    for step in range(300):
        did = rng.choice(ids)
        state = view.get(did)
        move = rng.random()
        if state is not None and move < 0.4:  # placed: busy
            view.put(state.model_copy(update={"run": f"r{step}"}))
        elif state is not None and move < 0.8:  # finished: idle, one more run
            view.put(state.model_copy(update={"run": None, "runs_total": state.runs_total + 1}))
        elif move < 0.9:  # the registry's own state, read again
            view.refresh([did])
        else:
            view.reload()
        for sel in selectors:
            picked = view.pick_idle(sel)
            expected = choose(view.idle(), None, sel)
            assert (picked and picked.info.id) == (expected and expected.info.id), (step, sel)
