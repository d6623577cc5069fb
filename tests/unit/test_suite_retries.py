"""A suite's batch on a real redis-server, through the state machine's own scripts: each flow
on every matching device, its request stored once per flow; a failed attempt with retries
left queues its next (same device, same batch, its own rows kept; a repeated finish makes no
second one); a done, cancelled or retry-less run is not tried again; the batch completes only
when its last attempt ends; events are written only for someone listening."""

from __future__ import annotations

import pytest
import redis

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.errors import InvalidRequestError
from scheduler.service.fleet import Fleet
from scheduler.service.requests import SuiteSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import Outcome, Platform, RunResult, RunStatus, StepRow
from workers.core.records import DeviceInfo, RunRecord, Selector
from workers.core.request import GoalRunRequest
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.state.runs import ClaimKind, RunStore, pending_score
from workers.fleet.state.states import Failure

KEYS = Keys("ts")


@pytest.fixture
def parts(client: redis.Redis):
    store = FleetStore(client, KEYS, retention_s=3600)
    fleet = Fleet(store, Dispatcher(store, RecordingEnqueuer(client, KEYS)), max_pending=100)
    for did, platform in (("i1", "ios"), ("a1", "android"), ("a2", "android")):
        info = DeviceInfo(id=did, platform=Platform(platform), labels={"pool": "ci"})
        store.registry.register(info, lease_holder(worker_name(did)), lease_s=30)
    return store, RunStore(client, KEYS), fleet


def suite(retries: int = 1, **over: object) -> SuiteSubmit:
    flows = [
        {"name": "a", "goal": "Sign in", "retries": retries,
         "matrix": [{"platform": "ios"}, {"platform": "android"}]},
        {"name": "b", "goal": "Sign up", "matrix": [{"labels": {"pool": "ci"}}]},
    ]  # fmt: skip
    return SuiteSubmit.model_validate({"suite": "s", "flows": flows, **over})


def run_to_end(rs: RunStore, run: RunRecord, status: RunStatus) -> None:
    """Claim `run` on its device, write one row, finish it `status`."""
    claim = rs.claim(run.id, run.target or "", worker_name(run.target or ""), cap=3)
    assert claim.kind is ClaimKind.CLAIMED
    row = StepRow(index=1, screen="s", refs_generation="1", candidates=0, outcome=Outcome.ACTED)
    rs.write_step(run.id, claim.token, row)
    loaded = rs.load(run.id)
    assert loaded is not None
    failure = Failure.NONE if status is RunStatus.DONE else Failure.DECISION
    result = RunResult(status=status, goal=run.request.goal, reason=f"ended {status.value}")
    assert rs.finish(loaded, claim.token, result, failure=failure, quarantine_after=9,
                     retention_s=60)  # fmt: skip


def on(store: FleetStore, device: str) -> str:
    """The run reserved for (or running on) `device`."""
    return next(d.run or "" for d in store.registry.devices() if d.info.id == device)


def reserve_all(fleet: Fleet) -> None:
    """A scheduler pass: the devices re-read (the finishes freed them), every pending run sent."""
    fleet.dispatcher.view.reload()
    fleet.dispatcher.dispatch()


def test_one_batch_for_the_matrix_with_each_flow_s_request(parts, client: redis.Redis) -> None:
    store, _, fleet = parts
    batch, _ = fleet.submit_suite(suite())
    runs = store.load_many(list(batch.runs))
    assert batch.suite == "s"
    assert sorted((r.flow, r.target) for r in runs) == [
        ("a", "a1"), ("a", "a2"), ("a", "i1"), ("b", "a1"), ("b", "a2"), ("b", "i1"),
    ]  # fmt: skip
    assert {r.flow: r.request.goal for r in runs} == {"a": "Sign in", "b": "Sign up"}
    # the first flow's request is the batch's (stored once); the second's on its own runs
    raw = {r.flow: client.hget(KEYS.run(r.id), "request") for r in runs}
    assert raw["a"] == ""
    assert '"Sign up"' in (raw["b"] or "")
    assert not client.exists(KEYS.events)  # no webhook, no one listens: no events


def test_a_failed_attempt_is_tried_again_on_its_device(parts, client: redis.Redis) -> None:
    store, rs, fleet = parts
    batch, _ = fleet.submit_suite(suite(retries=1))
    reserve_all(fleet)
    first = next(r for r in store.load_many(list(batch.runs)) if (r.flow, r.target) == ("a", "i1"))
    run_to_end(rs, store.load(first.id) or first, RunStatus.BLOCKED)
    after = store.batch(batch.id)
    assert after is not None
    assert (after.total, after.finished, len(after.runs)) == (7, 1, 7)
    again = store.load(after.runs[-1])
    assert again is not None
    assert (again.flow, again.target, again.retry, again.retries, again.retry_of) == (
        "a", "i1", 1, 0, first.id,
    )  # fmt: skip
    assert again.status is RunStatus.QUEUED
    assert again.request.goal == "Sign in"
    assert again.id in store.pending_ids()
    assert [s.index for s in store.steps(first.id)] == [1]  # the failed attempt keeps its row
    assert store.steps(again.id) == []
    # the retry waits its turn behind the run submitted before it (flow b on i1)
    reserve_all(fleet)
    assert on(store, "i1") != again.id
    busy = store.load(on(store, "i1"))
    assert busy is not None
    run_to_end(rs, busy, RunStatus.DONE)
    # the retry fails too: no retries left, nothing more
    reserve_all(fleet)
    assert on(store, "i1") == again.id
    run_to_end(rs, store.load(again.id) or again, RunStatus.ESCALATED)
    final = store.batch(batch.id)
    assert final is not None
    assert (final.total, final.finished) == (7, 3)


def test_every_record_field_is_either_asked_for_or_the_attempt_s_own() -> None:
    """The record's schema in one place: a field added to `RunRecord` must be placed in
    `ASKED` (a retry copies it) or `ATTEMPT` (each attempt has its own), never neither."""
    asked, own = set(RunRecord.ASKED), set(RunRecord.ATTEMPT)
    assert asked.isdisjoint(own)
    assert asked | own == set(RunRecord.model_fields)
    assert asked <= set(
        RunRecord(
            id="r",
            request=GoalRunRequest(goal="g"),
            submitted_at=0,
            target="t",
            selector=Selector(),
            batch="b",
            priority=1,
            schedule="s",
            owner="o",
            suite="u",
            flow="f",
        ).to_hash()
    )


def test_a_retry_copies_what_was_asked_and_nothing_of_the_attempt(
    parts, client: redis.Redis
) -> None:
    """Whatever the failed attempt's hash holds beyond what was asked for (its claim, lease
    holder, result, a field some script wrote), the next attempt starts without it."""
    store, rs, fleet = parts
    batch, _ = fleet.submit_suite(suite(retries=1))
    reserve_all(fleet)
    first = next(r for r in store.load_many(list(batch.runs)) if (r.flow, r.target) == ("a", "i1"))
    client.hset(KEYS.run(first.id), mapping={"schedule": "sc1", "owner": "alice",
                                             "quarantine_reason": "x", "future": "y"})  # fmt: skip
    run_to_end(rs, store.load(first.id) or first, RunStatus.BLOCKED)
    again_id = (store.batch(batch.id) or batch).runs[-1]
    old, new = client.hgetall(KEYS.run(first.id)), client.hgetall(KEYS.run(again_id))
    fresh = {"id", "status", "submitted_at", "retries", "retry", "retry_of"}
    assert set(new) == fresh | {f for f in RunRecord.ASKED if f in old}
    assert {f: new[f] for f in RunRecord.ASKED if f in old} == {
        f: old[f] for f in RunRecord.ASKED if f in old
    }
    assert (new["schedule"], new["owner"], new["flow"], new["target"]) == (
        "sc1",
        "alice",
        "a",
        "i1",
    )
    again = store.load(again_id)
    assert again is not None
    assert (again.status, again.device, again.worker, again.attempt, again.result) == (
        RunStatus.QUEUED, None, None, 0, None,
    )  # fmt: skip


def test_done_cancelled_and_retry_less_runs_are_not_tried_again(parts) -> None:
    store, rs, fleet = parts
    batch, _ = fleet.submit_suite(suite(retries=2))
    reserve_all(fleet)
    runs = {(r.flow, r.target): r for r in store.load_many(list(batch.runs))}
    run_to_end(rs, runs[("a", "i1")], RunStatus.DONE)
    reserve_all(fleet)
    run_to_end(rs, runs[("b", "i1")], RunStatus.BLOCKED)  # flow b has no retries
    store.cancel(runs[("a", "a1")].id)
    after = store.batch(batch.id)
    assert after is not None
    assert (after.total, len(after.runs)) == (6, 6)


def test_the_batch_completes_with_its_last_attempt(parts) -> None:
    store, rs, fleet = parts
    batch, _ = fleet.submit_suite(
        SuiteSubmit.model_validate({"suite": "one", "flows": [
            {"name": "a", "goal": "Sign in", "retries": 1, "matrix": [{"platform": "ios"}]}]})
    )  # fmt: skip
    reserve_all(fleet)
    (only,) = store.load_many(list(batch.runs))
    run_to_end(rs, only, RunStatus.MAX_STEPS)
    between = store.batch(batch.id)
    assert between is not None
    assert not between.complete  # one ended, its retry queued
    reserve_all(fleet)
    retry = store.load(between.runs[-1])
    assert retry is not None
    run_to_end(rs, retry, RunStatus.DONE)
    final = store.batch(batch.id)
    assert final is not None
    assert final.complete
    assert final.counts == {"max-steps": 1, "done": 1}


def test_a_matrix_cell_that_matches_nothing_names_itself(parts) -> None:
    _, _, fleet = parts
    cells = [{"platform": "ios"}, {"labels": {"pool": "zz"}}]
    flows = [{"name": "a", "goal": "g", "matrix": cells}]
    bad = SuiteSubmit.model_validate({"suite": "s", "flows": flows})
    with pytest.raises(InvalidRequestError) as err:
        fleet.submit_suite(bad)
    assert err.value.problems[0].field == "flows[0].matrix[1]"


def test_a_retry_waits_at_its_priority_as_a_submit_does(parts, client: redis.Redis) -> None:
    """The next attempt of a priority-3 run is queued with the score Python gives a submit of
    that priority at that time (`pending_score`): the Lua that queues a retry takes the
    priority span from Python, it does not write its own."""
    store, rs, fleet = parts
    flow = {"name": "a", "goal": "Sign in", "retries": 1, "priority": 3,
            "matrix": [{"platform": "ios"}]}  # fmt: skip
    batch, _ = fleet.submit_suite(SuiteSubmit.model_validate({"suite": "s", "flows": [flow]}))
    reserve_all(fleet)
    first = store.load(batch.runs[0])
    assert first is not None
    run_to_end(rs, first, RunStatus.BLOCKED)
    after = store.batch(batch.id)
    assert after is not None
    again = store.load(after.runs[-1])
    assert again is not None
    assert again.retry_of == first.id
    assert client.zscore(KEYS.pending, again.id) == pending_score(3, again.submitted_at)
