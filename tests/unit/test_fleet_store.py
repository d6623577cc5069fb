"""The store against a real redis-server: atomic submit with idempotency, reservation,
claim/redelivery/attempt cap, fenced step writes, finish with quarantine, cancel, schedules,
and the run task's body (`execute_run`) on a sim device — no Celery worker involved."""

from __future__ import annotations

import time

import pytest
import redis
from redis_values import keys_holding

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.errors import ConflictError, InvalidRequestError
from scheduler.service.fleet import Fleet
from scheduler.service.requests import BatchSubmit, RunSubmit, ScheduleSubmit
from scheduler.service.schedules import Schedules
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import Outcome, Platform, RunResult, RunStatus, StepRow
from workers.core.records import DeviceInfo, RunRecord
from workers.core.request import GoalRunRequest, SecretRef
from workers.core.secrets import DictSecrets
from workers.decide.factory import make_decider
from workers.devices.sim.device import make_sim_device
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.presence import Presence
from workers.fleet.runtime import WorkerRuntime, WorkerSpec
from workers.fleet.state.devices import DeviceTakenError, Renewal
from workers.fleet.state.runs import ClaimKind, ClaimLostError, RunStore, pending_score
from workers.fleet.state.states import Failure
from workers.fleet.tasks import execute_run
from workers.settings import Settings


@pytest.fixture
def parts(client: redis.Redis):
    keys = Keys("t")
    store = FleetStore(client, keys, retention_s=3600)
    enq = RecordingEnqueuer(client, keys)
    fleet = Fleet(store, Dispatcher(store, enq), max_pending=100)
    return store, RunStore(client, keys), enq, fleet


def register(store: FleetStore, did: str, platform: str = "ios", **labels: str) -> str:
    """Register `did` as a worker process would; returns its lease holder token."""
    info = DeviceInfo(id=did, platform=Platform(platform), os_version="17.5", labels=labels)
    holder = lease_holder(worker_name(did))
    store.registry.register(info, holder, lease_s=30)
    return holder


def test_submit_dispatches_to_idle_device_and_queues_the_rest(parts):
    """One device: the first run is reserved and enqueued at once, the second stays pending
    until the device frees, then the dispatcher sends it."""
    store, rs, enq, fleet = parts
    register(store, "d1")
    a, _ = fleet.submit_run(RunSubmit(goal="Sign in"))
    b, _ = fleet.submit_run(RunSubmit(goal="Sign in"))
    assert enq.sent == [(a.id, "d1")]
    assert store.pending_ids() == [b.id]
    assert store.load(b.id).device is None
    claim = rs.claim(a.id, "d1", "w@d1", cap=3)
    assert claim.kind is ClaimKind.CLAIMED
    assert claim.attempt == 1
    done = RunResult(status=RunStatus.DONE, goal="Sign in")
    assert rs.finish(
        store.load(a.id), claim.token, done, failure=Failure.NONE, quarantine_after=3,
        retention_s=60,
    )  # fmt: skip
    assert fleet.dispatcher.dispatch() == 1
    assert enq.sent[-1] == (b.id, "d1")


def test_priority_orders_pending_runs(parts):
    """Pending runs go out by priority (0 first), then by submit time."""
    store, _, enq, fleet = parts
    register(store, "d1")
    first, _ = fleet.submit_run(RunSubmit(goal="busy the device"))
    low, _ = fleet.submit_run(RunSubmit(goal="low", priority=5))
    high, _ = fleet.submit_run(RunSubmit(goal="high", priority=0))
    assert store.pending_ids() == [high.id, low.id]
    assert enq.sent == [(first.id, "d1")]


def test_idempotency_replays_and_conflicts(parts):
    """The same key and body return the first run without writing; another body is a 409."""
    store, _, _, fleet = parts
    register(store, "d1")
    a, created = fleet.submit_run(RunSubmit(goal="Sign in"), idempotency_key="k1")
    assert created
    keys_before = store.key_count()
    b, created = fleet.submit_run(RunSubmit(goal="Sign in"), idempotency_key="k1")
    assert not created
    assert b.id == a.id
    assert store.key_count() == keys_before
    with pytest.raises(ConflictError):
        fleet.submit_run(RunSubmit(goal="Sign out"), idempotency_key="k1")


def test_unknown_device_and_empty_selector_write_nothing(parts, client):
    """Validation that needs the store fails before any write."""
    store, _, enq, fleet = parts
    register(store, "d1")
    before = client.dbsize()
    with pytest.raises(InvalidRequestError) as e:
        fleet.submit_run(RunSubmit(goal="x", device="nope"))
    assert e.value.problems[0].field == "device"
    with pytest.raises(InvalidRequestError) as e:
        fleet.submit_batch(BatchSubmit(goal="x", selector={"platform": "android"}))
    assert e.value.problems[0].field == "selector"
    assert client.dbsize() == before
    assert enq.sent == []


def test_batch_fans_out_to_live_healthy_devices_only(parts, client):
    """A fan-out batch pins one run to each matching device that is alive and not quarantined:
    a run pinned to a dead device would stay pending and the batch never finish. With no such
    device it is the selector 422 (naming the down/quarantined ones and the fix), nothing
    written. A `count` batch still waits for any matching device."""
    store, _, _, fleet = parts
    k = Keys("t")
    for did in ("d1", "d2", "d3"):
        register(store, did)
    register(store, "a1", "android")
    client.delete(k.lease("d2"))  # d2's worker died
    client.hset(k.device("d3"), "quarantined", "1")
    batch, _ = fleet.submit_batch(BatchSubmit(goal="g", selector={"platform": "ios"}))
    assert batch.total == 1
    assert [store.load(r).target for r in batch.runs] == ["d1"]

    client.delete(k.lease("d1"))
    before = client.dbsize()
    with pytest.raises(InvalidRequestError) as e:
        fleet.submit_batch(BatchSubmit(goal="g", selector={"platform": "ios"}))
    [problem] = e.value.problems
    assert problem.field == "selector"
    assert "no live, healthy device" in problem.problem
    assert "d2 [ios, down]" in problem.problem
    assert "d3 [ios, quarantined]" in problem.problem
    assert "start" in problem.fix
    assert client.dbsize() == before
    waiting, _ = fleet.submit_batch(BatchSubmit(goal="g", selector={"platform": "ios"}, count=2))
    assert waiting.total == 2


def test_redelivery_counts_attempts_up_to_the_cap(parts):
    """A redelivered run restarts with attempt + 1 and its steps wiped; past the cap the claim
    says exhausted; a stale token can no longer write."""
    store, rs, _, fleet = parts
    register(store, "d1")
    run, _ = fleet.submit_run(RunSubmit(goal="Sign in"))
    c1 = rs.claim(run.id, "d1", "w@d1", cap=2)
    c2 = rs.claim(run.id, "d1", "w@d1", cap=2)
    assert (c1.attempt, c2.attempt) == (1, 2)
    assert c2.kind is ClaimKind.CLAIMED
    row = StepRow(index=1, screen="s", refs_generation="1", candidates=0, outcome=Outcome.ACTED)
    with pytest.raises(ClaimLostError):
        rs.write_step(run.id, c1.token, row)
    rs.write_step(run.id, c2.token, row)
    assert len(store.steps(run.id)) == 1
    c3 = rs.claim(run.id, "d1", "w@d1", cap=2)
    assert c3.kind is ClaimKind.EXHAUSTED
    assert store.steps(run.id) == []
    assert rs.claim(run.id, "d2", "w@d2", cap=2).kind is ClaimKind.ELSEWHERE


def test_quarantine_after_consecutive_infra_failures_and_recovery(parts):
    """N errored runs in a row quarantine the device (no dispatch); decision failures do not;
    a recovery lifts it."""
    store, rs, enq, fleet = parts
    register(store, "d1")
    errored = RunResult(status=RunStatus.ERRORED, goal="g")
    blocked = RunResult(status=RunStatus.BLOCKED, goal="g")
    for i, (res, failure) in enumerate(
        [(errored, Failure.INFRA), (blocked, Failure.DECISION), (errored, Failure.INFRA),
         (errored, Failure.INFRA)]
    ):  # fmt: skip
        run, _ = fleet.submit_run(RunSubmit(goal=f"g{i}"))
        c = rs.claim(run.id, "d1", "w@d1", cap=3)
        rs.finish(
            store.load(run.id), c.token, res, failure=failure, quarantine_after=2, retention_s=60
        )
    [state] = store.registry.devices()
    assert state.quarantined
    assert state.infra_failures == 2
    assert "infrastructure failures" in state.quarantine_reason
    sent = len(enq.sent)
    fleet.submit_run(RunSubmit(goal="waits"))
    assert len(enq.sent) == sent
    store.registry.recover("d1")
    assert fleet.dispatcher.dispatch() == 1


def test_cancel_queued_and_running(parts):
    """A queued run is cancelled at once (device freed, batch counted); a running one gets the
    flag the loop checks between steps; an ended one is a conflict."""
    store, rs, _, fleet = parts
    register(store, "d1")
    batch, _ = fleet.submit_batch(BatchSubmit(goal="g", count=2))
    r1, r2 = batch.runs
    running = r1 if store.load(r1).device else r2
    queued = r2 if running == r1 else r1
    assert store.cancel(queued) == "cancelled"
    assert store.load(queued).status is RunStatus.CANCELLED
    c = rs.claim(running, "d1", "w@d1", cap=3)
    assert c.kind is ClaimKind.CLAIMED
    assert store.cancel(running) == "requested"
    assert rs.cancel_requested(running)
    b = store.batch(batch.id)
    assert b.counts == {"cancelled": 1}
    assert b.finished == 1


def test_device_lease_is_exclusive(parts):
    """A second worker for the same device (same worker name `w@d1`, another process or host)
    cannot register while the first holds the lease; its renew and deregister do nothing (the
    first keeps the device); once the first deregisters, the second registers."""
    store, _, _, _ = parts
    reg = store.registry
    first = register(store, "d1")
    second = lease_holder(worker_name("d1"))
    assert first != second
    assert first.startswith("w@d1:")
    info = DeviceInfo(id="d1", platform=Platform.IOS)
    with pytest.raises(DeviceTakenError, match="held by another live worker"):
        reg.register(info, second, lease_s=30)
    assert reg.renew("d1", second, lease_s=30) is Renewal.TAKEN
    assert not reg.deregister("d1", second, keep_s=60)
    assert [d.info.id for d in reg.devices() if d.alive] == ["d1"]
    assert reg.renew("d1", first, lease_s=30) is Renewal.RENEWED
    assert reg.deregister("d1", first, keep_s=60)
    reg.register(info, second, lease_s=30)
    assert reg.renew("d1", first, lease_s=30) is Renewal.TAKEN  # a lapsed holder cannot retake


def test_presence_refuses_a_second_worker_and_keeps_the_first_lease(parts, client):
    """Two worker processes for one device: each `Presence` makes its own holder token, so
    the second refuses to start (DeviceTakenError) and stopping it does not drop the lease of
    the one still running; a lapsed lease is taken back by its own holder only."""
    store, _, _, _ = parts
    settings = Settings(redis_url="redis://unused", key_prefix="t", lease_s=30)
    spec = WorkerSpec(info=DeviceInfo(id="d1", platform=Platform.IOS), device_spec="x")
    a, b = Presence(store.registry, spec, settings), Presence(store.registry, spec, settings)
    assert a.holder != b.holder
    a.register()
    with pytest.raises(DeviceTakenError):
        b.register(wait_s=0)
    b.stop()
    assert client.get(Keys("t").lease("d1")) == a.holder
    assert store.registry.device_ids() == ["d1"]
    client.delete(Keys("t").lease("d1"))  # a long pause: a's lease lapsed
    b.beat_once()
    assert not client.exists(Keys("t").lease("d1"))
    a.beat_once()
    assert client.get(Keys("t").lease("d1")) == a.holder
    a.stop()
    assert store.registry.device_ids() == []
    b.register(wait_s=0)


def test_schedule_fires_once_per_period(parts, client):
    """A due schedule submits one batch and moves to its next time; a second tick in the same
    period fires nothing."""
    store, _, enq, fleet = parts
    register(store, "d1")
    register(store, "d2", "android")
    sched = Schedules(client, Keys("t"))
    s = sched.add(ScheduleSubmit(goal="smoke", name="smoke", every_s=60), now=1000.0)
    assert sched.tick(fleet, now=1001.0) == 1
    assert sched.tick(fleet, now=1002.0) == 0
    assert sched.list()[0].next_at == 1060.0
    assert len(enq.sent) == 2
    sched.remove(s.id)
    assert sched.list() == []


def test_execute_run_writes_steps_and_result(parts, client):
    """The task body on a zero-latency sim: claim, secrets resolved from the worker's side,
    steps written as they happen, the final result, the device freed; a missing secret ends
    `errored` naming the variable, without counting as an infrastructure failure."""
    store, rs, _, fleet = parts
    register(store, "d1")
    settings = Settings(redis_url="redis://unused", key_prefix="t")
    spec = WorkerSpec(info=DeviceInfo(id="d1", platform=Platform.IOS), device_spec="sim:signin-ios")
    rt = WorkerRuntime(
        settings=settings,
        spec=spec,
        redis=client,
        store=rs,
        open_device=lambda _rid: make_sim_device("sim:signin-ios"),
        make_decider=make_decider,
        secrets=DictSecrets({"PW": "hunter22"}),
    )
    sub = RunSubmit(
        goal="Sign in",
        device="d1",
        inputs={"email": "ada@example.com"},
        secrets={"password": SecretRef(ref="env:PW")},
    )
    run, _ = fleet.submit_run(sub)
    assert execute_run(rt, run.id) == "done"
    final = store.load(run.id)
    assert final.status is RunStatus.DONE
    assert final.result.device_id == "d1"
    assert final.result.attempt == 1
    assert [s.index for s in store.steps(run.id)] == [s.index for s in final.result.steps]
    assert keys_holding(client, "hunter22") == []
    assert execute_run(rt, run.id) == "skipped:terminal"

    bad = sub.model_copy(update={"secrets": {"password": SecretRef(ref="env:MISSING")}})
    run2, _ = fleet.submit_run(bad)
    assert execute_run(rt, run2.id) == "errored"
    r2 = store.load(run2.id)
    assert "GOALFLEET_SECRET_MISSING" in r2.reason
    assert store.registry.devices()[0].infra_failures == 0
    assert time.time() - r2.finished_at < 60


def test_sweep_ends_overdue_runs_and_reroutes_orphans(parts, client):
    """The scheduler's sweep ends a run still running past the hard limit (device freed) and
    sends a selector run reserved for a dead device back to pending."""
    store, rs, _, fleet = parts
    register(store, "d1")
    register(store, "d2")
    run, _ = fleet.submit_run(RunSubmit(goal="g", device="d1"))
    claim = rs.claim(run.id, "d1", "w@d1", cap=3)
    row = StepRow(index=1, screen="s", refs_generation="1", candidates=0, outcome=Outcome.ACTED)
    rs.write_step(run.id, claim.token, row)
    orphan, _ = fleet.submit_run(RunSubmit(goal="g", selector={}))
    assert store.load(orphan.id).device == "d2"
    client.delete(Keys("t").lease("d2"))  # d2's worker died
    d = Dispatcher(store, fleet.dispatcher.enqueuer, overdue_after_s=100, orphan_after_s=50)
    assert d.sweep(now=time.time() + 10) == 0
    assert d.sweep(now=time.time() + 200) == 2
    assert store.load(run.id).status is RunStatus.ERRORED
    assert store.load(run.id).result.steps == (row,)  # the rows written before it was lost
    assert store.load(orphan.id).device is None
    assert store.pending_ids() == [orphan.id]
    assert not [x for x in store.registry.devices() if x.run]


def test_sweep_resends_a_reservation_whose_message_was_lost(parts):
    """A run reserved on a live device that never started (crash between reserve and send) is
    sent again after `orphan_after_s`."""
    store, rs, enq, fleet = parts
    register(store, "d1")
    run, _ = fleet.submit_run(RunSubmit(goal="g", device="d1"))
    assert enq.sent == [(run.id, "d1")]
    d = Dispatcher(store, enq, overdue_after_s=1000, orphan_after_s=50)
    assert d.sweep(now=time.time() + 10) == 0
    assert d.sweep(now=time.time() + 100) == 1
    assert enq.sent == [(run.id, "d1"), (run.id, "d1")]
    assert rs.claim(run.id, "d1", "w@d1", cap=3).attempt == 1


def _finish(store: FleetStore, rs: RunStore, run_id: str, device: str) -> None:
    c = rs.claim(run_id, device, f"w@{device}", cap=3)
    done = RunResult(status=RunStatus.DONE, goal="g")
    assert rs.finish(
        store.load(run_id), c.token, done, failure=Failure.NONE, quarantine_after=3,
        retention_s=60,
    )  # fmt: skip


def test_graceful_shutdown_hands_back_the_run_reserved_after_the_last_finish(parts, client):
    """The reviewer's scenario: a worker in warm shutdown finishes its last run, the dispatcher
    reserves the next pending run for it and sends it, then the worker deregisters. The run
    goes back to pending with its own score (in the same script) and is dispatched to another
    matching device; the stale message on the old device's queue is skipped by the claim."""
    store, rs, enq, fleet = parts
    holder = register(store, "d1")
    first, _ = fleet.submit_run(RunSubmit(goal="last run", selector={"platform": "ios"}))
    nxt, _ = fleet.submit_run(RunSubmit(goal="next", selector={"platform": "ios"}, priority=3))
    _finish(store, rs, first.id, "d1")
    assert fleet.dispatcher.dispatch() == 1
    assert enq.sent[-1] == (nxt.id, "d1")
    assert store.pending_ids() == []

    assert store.registry.deregister("d1", holder, keep_s=60)
    back = store.load(nxt.id)
    assert back.status is RunStatus.QUEUED
    assert back.device is None
    assert client.zscore(Keys("t").pending, nxt.id) == pending_score(3, back.submitted_at)
    assert client.hget(Keys("t").device("d1"), "run") == ""
    assert store.registry.device_ids() == []

    register(store, "d2")
    assert fleet.dispatcher.dispatch() == 1
    assert enq.sent[-1] == (nxt.id, "d2")
    assert rs.claim(nxt.id, "d1", "w@d1", cap=3).kind is ClaimKind.ELSEWHERE
    assert rs.claim(nxt.id, "d2", "w@d2", cap=3).kind is ClaimKind.CLAIMED


def test_deregister_keeps_an_exact_run_pending_for_its_device(parts):
    """A run sent to that exact device goes back to pending too, waits while the device is away
    (another idle device does not take it) and is dispatched when the device returns. A run
    already claimed is left alone (its worker finishes it in warm shutdown)."""
    store, rs, enq, fleet = parts
    holder = register(store, "d1")
    run, _ = fleet.submit_run(RunSubmit(goal="g", device="d1"))
    assert enq.sent == [(run.id, "d1")]
    assert store.registry.deregister("d1", holder, keep_s=60)
    assert store.pending_ids() == [run.id]
    register(store, "d2")
    assert fleet.dispatcher.dispatch() == 0
    holder = register(store, "d1")
    assert fleet.dispatcher.dispatch() == 1
    assert enq.sent[-1] == (run.id, "d1")

    rs.claim(run.id, "d1", "w@d1", cap=3)
    assert store.registry.deregister("d1", holder, keep_s=60)
    assert store.load(run.id).status is RunStatus.RUNNING
    assert store.pending_ids() == []


def test_sweep_repends_a_run_reserved_for_a_device_that_vanished(parts, client):
    """A reservation no registered device holds (the device's record is gone, or it left the
    device set without handing the run back) is found through the reservation index and goes
    back to pending after `orphan_after_s`, then to another matching device; claimed runs
    leave the index."""
    store, rs, enq, fleet = parts
    k = Keys("t")
    register(store, "d1")
    register(store, "d2")
    a, _ = fleet.submit_run(RunSubmit(goal="a", device="d1"))
    b, _ = fleet.submit_run(RunSubmit(goal="b", device="d2"))
    c, _ = fleet.submit_run(RunSubmit(goal="c", selector={"platform": "ios"}))
    assert store.load(c.id).device is None  # both devices busy
    rs.claim(b.id, "d2", "w@d2", cap=3)
    assert client.zrange(k.reserved, 0, -1) == [a.id]
    client.delete(k.device("d1"), k.lease("d1"))  # d1's record vanished
    client.srem(k.devices, "d1")
    d = Dispatcher(store, enq, orphan_after_s=50)
    assert d.sweep(now=time.time() + 10) == 0
    assert d.sweep(now=time.time() + 100) == 1
    assert store.load(a.id).device is None
    assert set(store.pending_ids()) == {a.id, c.id}
    assert client.zcard(k.reserved) == 0
    _finish(store, rs, b.id, "d2")
    register(store, "d3")
    assert d.dispatch() == 1  # a waits for d1; c goes to an idle ios device
    assert enq.sent[-1][0] == c.id
    assert store.pending_ids() == [a.id]


def test_every_reservation_sends_its_message_once(parts, client):
    """Every way a run is reserved sends its message after the script, and a refused
    reservation sends none: a submit onto a free device, the dispatcher's reserve, and the
    sweep's resend of a reservation never claimed; a resend for a device that no longer holds
    the run sends nothing."""
    store, _, enq, fleet = parts
    register(store, "d1")
    register(store, "d2")
    first, _ = fleet.submit_run(RunSubmit(goal="g", device="d1"))
    assert enq.sent == [(first.id, "d1")]
    refused = RunRecord(id="r-refused", request=GoalRunRequest(goal="g"), submitted_at=1.0)
    store.create([refused])
    assert store.reserve(refused.id, "d1") is None  # d1 is busy
    d = fleet.dispatcher
    assert d.dispatch([refused.id]) == 1
    assert store.load(refused.id).device == "d2"
    assert enq.sent == [(first.id, "d1"), (refused.id, "d2")]
    assert not d._resend_or_release(store.load(first.id), "d2")  # not d2's: nothing sent
    assert d._resend_or_release(store.load(first.id), "d1")  # never claimed: sent again
    assert enq.sent == [(first.id, "d1"), (refused.id, "d2"), (first.id, "d1")]
    assert client.llen(Keys("t").queue("d1")) == 0  # the fake's messages reach no worker
