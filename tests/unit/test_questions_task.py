"""The run task with a decider chain and questions (real Redis, the task body without Celery):
a chain whose second decider resolves the twins chooser ends done with both attempts on the
row; without one the run parks awaiting_answer with a question that holds no value; a
person's answer teaches the memory and queues the run again; expiry and cancel end it."""

from __future__ import annotations

from test_fleet_store import parts, register  # noqa: F401 - pytest fixtures

from scheduler.requests import RunSubmit
from workers.core.model import DecideState, Decision, Platform, RunStatus
from workers.core.records import Answer, DeviceInfo
from workers.core.request import SecretRef
from workers.core.secrets import DictSecrets
from workers.decide.rules import RulesDecider
from workers.devices.sim import make_sim_device
from workers.fleet.keys import Keys
from workers.fleet.questions import QuestionStore
from workers.fleet.runtime import WorkerRuntime, WorkerSpec
from workers.fleet.tasks import execute_run
from workers.settings import Settings

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
