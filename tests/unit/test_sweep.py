"""The scheduler's sweep at fleet scale: it reads what is due, never every busy device's run."""

from __future__ import annotations

import time

import redis
from test_fleet_store import parts, register  # noqa: F401 - pytest fixtures

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.service.requests import RunSubmit
from scheduler.store.runs import FleetStore
from workers.core.model import RunResult, RunStatus
from workers.fleet.fence import Fence
from workers.fleet.keys import Keys
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure

N = 50


def commands(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def busy_fleet(parts) -> tuple[FleetStore, RunStore, list[str], list[str]]:
    """N devices, each running a run its worker claimed just now (fenced by its lease);
    returns (store, runs, run ids, claim tokens)."""
    store, rs, _, fleet = parts
    ids, tokens = [], []
    for i in range(N):
        did = f"d{i:03}"
        fence = Fence(did, register(store, did), lease_s=30)
        run, _ = fleet.submit_run(RunSubmit(goal="g", device=did))
        ids.append(run.id)
        tokens.append(rs.claim(run.id, did, f"w@{did}", cap=3, fence=fence).token)
    return store, rs, ids, tokens


def test_a_sweep_with_nothing_due_reads_no_run(parts, client):
    """50 busy devices, none of them overdue: a sweep costs a handful of commands, not one
    read per busy run (it was one per busy run, every second: 10,011 commands at 10,000 busy
    devices in bench/bench_scheduler.py; 3 per run here, where the view is re-read too)."""
    store, _, ids, _ = busy_fleet(parts)
    d = Dispatcher(store, parts[2], overdue_after_s=100, orphan_after_s=50)
    d.view.reload()
    before = commands(client)
    assert d.sweep(now=time.time() + 10) == 0
    used = commands(client) - before - 1  # the INFO that read `before`
    assert used <= 5, used
    assert all(store.load(i).status is RunStatus.RUNNING for i in ids)


def test_overdue_runs_are_found_by_their_claim_time(parts, client):
    """Every run still running past `overdue_after_s` is ended `errored` and its device
    freed; the index keeps nothing for them afterwards."""
    store, _, ids, _ = busy_fleet(parts)
    d = Dispatcher(store, parts[2], overdue_after_s=100, orphan_after_s=50)
    assert d.sweep(now=time.time() + 200) == N
    assert {store.load(i).status for i in ids} == {RunStatus.ERRORED}
    assert not [x for x in store.registry.devices() if x.run]
    assert client.zcard(Keys("t").running) == 0


def test_finished_and_handed_back_runs_leave_the_index(parts, client):
    """A finished run leaves the index at its finish; one handed back to pending is dropped
    by the sweep (not ended) once its claim time is past the bound; one claimed again is
    judged by its new claim time."""
    store, rs, ids, tokens = busy_fleet(parts)
    done, back, again = ids[:3]
    result = RunResult(status=RunStatus.DONE, goal="g")
    assert rs.finish(store.load(done), tokens[0], result, failure=Failure.NONE,
                     quarantine_after=3, retention_s=60)  # fmt: skip
    assert client.zscore(Keys("t").running, done) is None
    assert rs.hand_back(store.load(back), "d001", tokens[1])
    time.sleep(0.01)
    assert rs.hand_back(store.load(again), "d002", tokens[2])
    assert store.reserve(again, "d002") is not None
    rs.claim(again, "d002", "w@d002", cap=3)
    later = client.zscore(Keys("t").running, again)
    d = Dispatcher(store, parts[2], overdue_after_s=100, orphan_after_s=10**6)
    assert d.sweep(now=later + 100 - 0.005) == N - 3  # the rest; not `again`, claimed later
    assert store.load(back).status is RunStatus.QUEUED
    assert client.zscore(Keys("t").running, back) is None
    assert store.load(again).status is RunStatus.RUNNING
    assert client.zscore(Keys("t").running, again) == later


def test_runs_whose_worker_lost_the_lease_go_back_to_pending(parts, client):
    """Of 50 busy devices, 2 lose their lease (nobody holds it) and 1 is registered again by
    a new worker process: those 3 runs are pending again, attempt 1 kept, their devices
    freed, the new worker's device idle in the view; the other 47 run on; it costs one read
    per running run and per device (the view's re-read of the 3 devices aside)."""
    store, _, ids, _ = busy_fleet(parts)
    k = Keys("t")
    for i in (0, 1):
        client.delete(k.lease(f"d{i:03}"))
    client.delete(k.lease("d002"))
    register(store, "d002")  # a new process: the claim's holder no longer holds the lease
    d = Dispatcher(store, parts[2], lapsed_every_s=1.0)
    before = commands(client)
    assert d.sweep() == 3
    used = commands(client) - before - 1
    # the finding script (EVALSHA, ZRANGE, an HMGET and a GET per run), then per run moved
    # its script (EVALSHA and the ~15 commands it runs) and its device's re-read (3)
    assert used <= 2 + 2 * N + 3 * 20, used
    moved = [store.load(i) for i in ids[:3]]
    assert [(r.status, r.device, r.attempt) for r in moved] == [(RunStatus.QUEUED, None, 1)] * 3
    assert {x.info.id: x.run for x in store.registry.devices() if x.info.id < "d003"} == {
        "d000": None, "d001": None, "d002": None,
    }  # fmt: skip
    assert {x.info.id for x in d.view.idle()} == {"d002"}
    assert {store.load(i).status for i in ids[3:]} == {RunStatus.RUNNING}
    assert d.sweep() == 0  # the next check is a quarter lease away; nothing else is due


def test_the_lapse_check_reads_the_running_index_in_slices(parts, client):
    """With slices of 7 running runs, lapsed leases on the first and the last of 50 busy
    devices are both found (8 slices, the last one short)."""
    store, _, ids, _ = busy_fleet(parts)
    for did in ("d000", "d049"):
        client.delete(Keys("t").lease(did))
    moved = store.release_lapsed(slice_size=7)
    assert sorted(moved) == sorted([(ids[0], "d000"), (ids[49], "d049")])
    assert store.release_lapsed(slice_size=7) == []


def test_a_lapsed_run_whose_cancel_was_requested_ends_cancelled(parts, client):
    """A run whose cancel was requested while it ran, then whose worker died: the sweep ends
    it `cancelled` (its device freed) instead of queueing it for another device."""
    store, _, ids, _ = busy_fleet(parts)
    assert store.cancel(ids[0]) == "requested"
    client.delete(Keys("t").lease("d000"))
    d = Dispatcher(store, parts[2], lapsed_every_s=1.0)
    assert d.sweep() == 1
    run = store.load(ids[0])
    assert run is not None
    assert (run.status, run.attempt) == (RunStatus.CANCELLED, 1)
    assert client.zscore(Keys("t").pending, ids[0]) is None
