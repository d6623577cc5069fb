"""The run task with a decider chain and questions (real Redis, the task body without Celery):
a chain whose second decider resolves the twins chooser ends done with both attempts on the
row; without one the run parks awaiting_answer with a question that holds no value; a
person's answer teaches the memory and queues the run again; expiry and cancel end it."""

from __future__ import annotations

import time

import pytest
from test_fleet_store import parts, register  # noqa: F401 - pytest fixtures

from scheduler.service.requests import RunSubmit
from workers.core.errors import ConfigError
from workers.core.model import DecideState, Decision, Platform, RunResult, RunStatus
from workers.core.records import Answer, DeviceInfo, Question
from workers.core.request import SecretRef
from workers.core.secrets import DictSecrets
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device
from workers.fleet.fence import Fence, LeaseLostError
from workers.fleet.keys import Keys
from workers.fleet.runtime import WorkerRuntime, WorkerSpec
from workers.fleet.state.questions import QuestionStore
from workers.fleet.tasks import execute_run
from workers.settings import Settings
from workers.telemetry.observers import NullObserver

SECRET = "pw-twins-must-not-leak"
EMAIL = "ada.q@example.com"


class PressAda:
    """A 'stronger' decider: knows which account is the caller's."""

    def decide(self, state: DecideState) -> Decision:
        for c in state.candidates:
            if c.name == "Continue as ada":
                return Decision(target=c.ref, confidence=0.95, decided_by="model")
        return RulesDecider().decide(state)


def runtime(client, rs) -> WorkerRuntime:
    deciders = {"rules": RulesDecider(), "scripted": PressAda()}
    return WorkerRuntime(
        settings=Settings(redis_url="redis://unused", key_prefix="t"),
        spec=WorkerSpec(info=DeviceInfo(id="d1", platform=Platform.IOS), device_spec="x"),
        redis=client,
        store=rs,
        open_device=lambda _rid: make_sim_device("sim:twins-ios"),
        make_decider=deciders.__getitem__,
        secrets=DictSecrets({"PW": SECRET}),
    )


def submit(fleet, **kw) -> str:
    run, _ = fleet.submit_run(
        RunSubmit(
            goal="Sign in",
            device="d1",
            inputs={"email": EMAIL},
            secrets={"password": SecretRef(ref="env:PW")},
            **kw,
        )
    )
    return run.id


def questions(client) -> QuestionStore:
    return QuestionStore(client, Keys("t"), retention_s=3600, memory_ttl_s=3600)


def test_the_second_decider_of_the_chain_resolves_it(parts, client):
    store, rs, _, fleet = parts
    register(store, "d1")
    run_id = submit(fleet, escalate_to=["scripted"])
    assert execute_run(runtime(client, rs), run_id) == "done"
    [row] = [r for r in store.steps(run_id) if r.screen == "Choose how to continue"]
    assert [(a.decider, bool(a.escalated)) for a in row.attempts] == [
        ("rules", True),
        ("scripted", False),
    ]


def test_an_escalated_run_parks_and_an_answer_requeues_it(parts, client):
    store, rs, _, fleet = parts
    register(store, "d1")
    run_id = submit(fleet)
    assert execute_run(runtime(client, rs), run_id) == "awaiting_answer"
    run = store.load(run_id)
    assert run.status is RunStatus.AWAITING_ANSWER
    assert client.hget("t:device:d1", "run") == ""  # the device is free
    qs = questions(client)
    [q] = qs.open()
    assert q.run_id == run_id
    assert q.screen.screen == "Choose how to continue"
    raw = client.get(f"t:question:{run_id}")
    assert SECRET not in raw
    assert EMAIL not in raw

    assert qs.answer(run_id, Answer(target="continue as ADA"), who="ada-ops") == "queued"
    again = store.load(run_id)
    assert (again.status, again.device, again.attempt) == (RunStatus.QUEUED, None, 0)
    assert client.zscore("t:pending", run_id) is not None
    fleet.dispatcher.dispatch()
    assert execute_run(runtime(client, rs), run_id) == "done"
    [row] = [r for r in store.steps(run_id) if r.screen == "Choose how to continue"]
    assert row.decision.decided_by == "memory"
    assert row.memory.source == "human"
    # the next run learns from the person, with no question
    other = submit(fleet)
    assert execute_run(runtime(client, rs), other) == "done"


def test_expiry_and_cancel_end_a_parked_run(parts, client):
    store, rs, _, fleet = parts
    register(store, "d1")
    qs = questions(client)
    first, second = submit(fleet), submit(fleet)
    assert execute_run(runtime(client, rs), first) == "awaiting_answer"
    fleet.dispatcher.dispatch()
    assert execute_run(runtime(client, rs), second) == "awaiting_answer"
    client.zadd("t:questions", {first: 0})
    assert qs.expire() == 1
    assert store.load(first).status is RunStatus.ESCALATED
    assert qs.cancel(second) is True
    assert store.load(second).status is RunStatus.CANCELLED
    assert qs.open() == []
    assert qs.cancel(second) is False


def test_a_dangerous_control_is_never_an_answer(parts, client):
    """A person cannot answer 'press Delete account': no run would press it (the guard
    applies to every decision), so the answer is refused, saying what to do instead."""
    store, rs, _, fleet = parts
    register(store, "d1")
    run_id = submit(fleet)
    assert execute_run(runtime(client, rs), run_id) == "awaiting_answer"
    qs = questions(client)
    question = qs.get(run_id)
    dangerous = question.screen.model_copy(
        update={
            "candidates": (
                *question.screen.candidates,
                question.screen.candidates[0].model_copy(
                    update={"ref": "e99", "name": "Delete account"}
                ),
            )
        }
    )
    client.set(
        f"t:question:{run_id}", question.model_copy(update={"screen": dangerous}).model_dump_json()
    )
    with pytest.raises(ConfigError, match="dangerous-controls guard"):
        qs.answer(run_id, Answer(target="Delete account"), who="ada-ops")
    assert store.load(run_id).status is RunStatus.AWAITING_ANSWER
    assert client.keys("t:mem:*") == []  # nothing learned


def test_a_run_without_memory_is_not_parked(parts, client):
    """An answer reaches a run through the decision memory: a run that opted out of it ends
    escalated at once instead of waiting for an answer it could not use."""
    store, rs, _, fleet = parts
    register(store, "d1")
    run_id = submit(fleet, memory=False)
    assert execute_run(runtime(client, rs), run_id) == "escalated"
    assert questions(client).open() == []


def test_a_cancel_requested_during_the_last_step_wins_over_parking(parts, client):
    store, rs, _, fleet = parts
    register(store, "d1")
    run_id = submit(fleet)

    class CancelThenAsk(RulesDecider):
        def decide(self, state: DecideState) -> Decision:
            if state.screen == "Choose how to continue":
                fleet.cancel(run_id)  # the caller cancels while the step decides
            return super().decide(state)

    rt = runtime(client, rs)
    rt.make_decider = {"rules": CancelThenAsk()}.__getitem__
    assert execute_run(rt, run_id) == "escalated"
    assert questions(client).open() == []
    assert store.load(run_id).status.terminal


def test_expire_leaves_a_question_answered_meanwhile(parts, client):
    store, rs, _, fleet = parts
    register(store, "d1")
    qs = questions(client)
    run_id = submit(fleet)
    assert execute_run(runtime(client, rs), run_id) == "awaiting_answer"
    qs.answer(run_id, Answer(target="Continue as ada"), who="ada-ops")
    client.zadd("t:questions", {run_id: 0})  # a stale index entry, as if read before the answer
    assert qs.expire() == 0
    assert store.load(run_id).status is RunStatus.QUEUED


def test_park_is_refused_to_a_worker_that_lost_the_lease(parts, client):
    """Parking is a step write: once another worker holds the device's lease (this one froze
    after its escalated step was written), `park` raises `LeaseLostError` from its script and
    parks nothing; the task hands the run back to pending (attempt counted once, nothing
    against the device) instead of leaving a question a stale worker asked."""
    store, rs, _, fleet = parts
    holder = register(store, "d1")
    fence = Fence("d1", holder, lease_s=30)
    fence.granted(time.monotonic_ns())
    run_id = submit(fleet)

    class TakeOverAfterTheEscalatedRow(NullObserver):
        def step(self, record, row) -> None:
            if row.screen == "Choose how to continue":
                client.delete(Keys("t").lease("d1"))  # lapsed while this worker was frozen
                register(store, "d1")  # a replacement registered

    rt = runtime(client, rs)
    rt.fence = fence
    rt.observers = (TakeOverAfterTheEscalatedRow(),)
    assert execute_run(rt, run_id) == "skipped:lease-lost"
    back = store.load(run_id)
    assert (back.status, back.device, back.attempt) == (RunStatus.QUEUED, None, 1)
    assert run_id in store.pending_ids()
    assert questions(client).open() == []
    assert not client.exists(f"t:question:{run_id}")
    assert client.hget("t:device:d1", "run") in (None, "")
    assert client.hget("t:device:d1", "infra_failures") in (None, "0")
    assert fence.taken  # another holder: the worker stands down


def test_park_checks_the_lease_holder_in_its_script(parts, client):
    """`QuestionStore.park` with a fence: nobody holding the lease (-2) and another holder
    (-1) both raise `LeaseLostError` and leave the run running and claimed, with no question;
    the holder itself parks it."""
    store, rs, _, fleet = parts
    fence = Fence("d1", register(store, "d1"), lease_s=30)
    run_id = submit(fleet)
    claim = rs.claim(run_id, "d1", "w@d1", cap=3, fence=fence)
    record = store.load(run_id)
    waiting = RunResult(status=RunStatus.AWAITING_ANSWER, goal="Sign in", reason="ask")
    screen = DecideState(goal="Sign in", step=1, candidates=(), context=(), input_names=())
    question = Question(
        run_id=run_id, goal="Sign in", step=1, screen=screen, reason="ask", decider="rules",
        device="d1", asked_at=0.0, deadline=60.0,
    )  # fmt: skip
    qs = questions(client)
    lease = client.get(Keys("t").lease("d1"))
    client.delete(Keys("t").lease("d1"))
    with pytest.raises(LeaseLostError, match="nobody holds") as lapsed:
        qs.park(record, claim.token, waiting, question, fence=fence)
    assert lapsed.value.taken is False
    register(store, "d1")
    with pytest.raises(LeaseLostError, match="another worker holds") as taken:
        qs.park(record, claim.token, waiting, question, fence=fence)
    assert taken.value.taken is True
    after = store.load(run_id)
    assert (after.status, after.attempt, after.device) == (RunStatus.RUNNING, 1, "d1")
    assert qs.open() == []
    assert not client.exists(f"t:question:{run_id}")
    client.set(Keys("t").lease("d1"), lease)  # the holder again
    assert qs.park(record, claim.token, waiting, question, fence=fence) == 1
    assert store.load(run_id).status is RunStatus.AWAITING_ANSWER
