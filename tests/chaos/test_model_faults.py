"""Model faults: `InstructorDecider` against the local fake model server (real HTTP, the real
OpenAI client and instructor), run through the worker's task body (`execute_run`: claim, step
rows, finish) on a real Redis with a real `SimDevice`.

Timeouts and HTTP errors end the run `errored` (infrastructure, MODEL_UNAVAILABLE); invalid
JSON and invented refs are re-asked once, then the run is `escalated`; no fault ever makes the
device act on a ref that was not on the screen it was chosen from.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import instructor
import pytest
from chaoskit import chaos_settings
from fakes.model_server import FakeModelServer
from openai import OpenAI

from scheduler.local.redis import LocalRedis
from workers.core.model import ActionResult, InputValue, Outcome, Platform, RunStatus, Snapshot
from workers.core.ports import Decider, Device, DevicePort
from workers.core.records import DeviceInfo, RunRecord
from workers.core.request import GoalRunRequest, SecretRef
from workers.core.secrets import DictSecrets
from workers.decide.instructor import InstructorDecider
from workers.devices.sim.device import SimDevice, make_sim_device
from workers.fleet.runtime import WorkerRuntime, WorkerSpec, build_runtime
from workers.fleet.tasks import execute_run

DEVICE = "model-1"
SECRET = "model-Secret-31415"


@dataclass
class Recording(Device):
    """A DevicePort wrapper that records each snapshot's refs and each action's pinned ref."""

    inner: SimDevice
    made: list[tuple[str, str, frozenset[str]]] = field(default_factory=list)
    """(kind, pinned ref, the refs of the snapshot it names)."""
    screens: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def platform(self) -> Platform:
        return self.inner.platform

    def snapshot(self) -> Snapshot:
        snap = self.inner.snapshot()
        self.screens[snap.refs_generation] = frozenset(c.ref for c in snap.candidates)
        return snap

    def _refs_of(self, pinned: str) -> frozenset[str]:
        return self.screens.get(pinned.rpartition("~s")[2], frozenset())

    def press(self, pinned_ref: str) -> ActionResult:
        self.made.append(("press", pinned_ref, self._refs_of(pinned_ref)))
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self.made.append(("fill", pinned_ref, self._refs_of(pinned_ref)))
        return self.inner.fill(pinned_ref, value)

    def close(self) -> None:
        self.inner.close()


@dataclass
class Harness:
    rt: WorkerRuntime
    server: FakeModelServer
    devices: list[Recording]

    def run(self, **request: object) -> RunRecord:
        """Write a run reserved for this device and execute it as the task would."""
        run_id = uuid.uuid4().hex
        req = GoalRunRequest.model_validate(
            {
                "goal": "Sign in",
                "inputs": {"email": "ada@example.com"},
                "secrets": {"password": SecretRef(ref="env:MODEL_PW")},
                "decider": "openai/fake-model",
                "ask_person": False,  # a decision failure ends `escalated`, not parked
                **request,
            }
        )
        rec = RunRecord(id=run_id, request=req, device=DEVICE, submitted_at=time.time())
        fields: dict[Any, Any] = dict(rec.to_hash())
        self.rt.redis.hset(self.rt.store.k.run(run_id), mapping=fields)
        self.rt.redis.hset(self.rt.store.k.device(DEVICE), "run", run_id)
        execute_run(self.rt, run_id)
        final = self.rt.store.load(run_id)
        assert final is not None
        return final

    def assert_only_refs_on_screen(self) -> None:
        for dev in self.devices:
            for kind, pinned, refs in dev.made:
                ref = pinned.lstrip("@").partition("~")[0]
                assert ref in refs, f"{kind} on {pinned}, not on its screen {sorted(refs)}"


@pytest.fixture
def harness(aof_redis: LocalRedis, model_server: FakeModelServer) -> Iterator[Harness]:
    settings = chaos_settings(aof_redis.url)
    spec = WorkerSpec(info=DeviceInfo(id=DEVICE, platform=Platform.IOS), device_spec="sim:x")
    devices: list[Recording] = []

    def open_device(run_id: str) -> DevicePort:
        dev = Recording(make_sim_device("sim:signin-ios", seed=hash(run_id) & 0xFFFF))
        devices.append(dev)
        return dev

    def make_decider(spec: str) -> Decider:
        assert spec == "openai/fake-model"
        sdk = OpenAI(base_url=model_server.base_url, api_key="test", max_retries=0, timeout=0.5)
        return InstructorDecider(instructor.from_openai(sdk), "fake-model", timeout_s=0.5)

    rt = build_runtime(
        settings,
        spec,
        DictSecrets({"MODEL_PW": SECRET}),
        open_device=open_device,
        make_decider=make_decider,
    )
    try:
        yield Harness(rt, model_server, devices)
    finally:
        rt.redis.close()


def _answer(action: str) -> dict[str, object]:
    return {"action": action}


def _steps(h: Harness, run: RunRecord) -> list[Outcome]:
    rows = h.rt.redis.hvals(h.rt.store.k.steps(run.id))
    assert run.result is not None
    assert len(rows) == len(run.result.steps)
    return [s.outcome for s in run.result.steps]


def test_timeout_ends_errored_model_unavailable(harness: Harness) -> None:
    """A model that does not answer within the timeout: the run ends `errored` with
    MODEL_UNAVAILABLE (infrastructure), after one snapshot and no action. A model outage is
    not the device's fault: it does not count towards the device's quarantine."""
    harness.server.stall(3.0)
    run = harness.run()
    assert run.status is RunStatus.ERRORED, run.reason
    assert run.result is not None
    assert run.result.error is not None
    assert run.result.error.code == "MODEL_UNAVAILABLE"
    assert "timed out" in run.reason.lower() or "timeout" in run.reason.lower(), run.reason
    assert _steps(harness, run) == [Outcome.ERRORED]
    assert harness.devices[-1].made == []
    failures = harness.rt.redis.hget(harness.rt.store.k.device(DEVICE), "infra_failures")
    assert int(failures or 0) == 0


def test_http_500_ends_errored(harness: Harness) -> None:
    """An HTTP 500 from the model server: `errored` MODEL_UNAVAILABLE, nothing pressed."""
    harness.server.fail(500)
    run = harness.run()
    assert run.status is RunStatus.ERRORED
    assert run.result is not None
    assert run.result.error is not None
    assert run.result.error.code == "MODEL_UNAVAILABLE"
    assert harness.devices[-1].made == []


def test_invalid_json_is_reasked_then_escalated(harness: Harness) -> None:
    """Malformed JSON twice: one re-ask (two requests), then `escalated`, nothing pressed."""
    harness.server.answer_raw_arguments("{not json")
    harness.server.answer_raw_arguments('{"target": ')
    run = harness.run()
    assert run.status is RunStatus.ESCALATED, run.reason
    assert len(harness.server.bodies) == 2
    assert _steps(harness, run) == [Outcome.ESCALATED]
    assert harness.devices[-1].made == []
    # a decision failure, not infrastructure: the device is not marked failing
    assert harness.rt.redis.hget(harness.rt.store.k.device(DEVICE), "infra_failures") == "0"


def test_invented_ref_is_reasked_then_escalated(harness: Harness) -> None:
    """A ref that is not on the screen, twice: re-asked once (the second request says why),
    then `escalated`; the device never acts."""
    harness.server.answer(_answer("e99=email"))
    harness.server.answer(_answer("e42"))
    run = harness.run()
    assert run.status is RunStatus.ESCALATED, run.reason
    assert len(harness.server.bodies) == 2
    reask = str(harness.server.bodies[1]["messages"])
    assert "e99" in reask  # the validation error travels back to the model
    assert harness.devices[-1].made == []


def test_invented_ref_then_valid_answer_acts_on_a_screen_ref(harness: Harness) -> None:
    """An invented ref, then a valid one after the re-ask: the run acts, only ever on refs of
    the screen the decision was made on, and signs in."""
    harness.server.answer(_answer("e77=email"))
    harness.server.answer(_answer("e2=email"))  # Email
    harness.server.answer(_answer("e3"))  # Continue
    harness.server.answer(_answer("e99"))  # invented again on the password screen
    harness.server.answer(_answer("e2=password"))  # Password
    harness.server.answer(_answer("e3"))  # Sign in
    run = harness.run(done_when="Welcome")
    assert run.status is RunStatus.DONE, run.reason
    assert len(harness.devices[-1].made) == 4
    harness.assert_only_refs_on_screen()
    # each acted step records who decided, how sure (from logprobs) and what it cost,
    # the re-asks included (both counts cover two requests on those steps)
    assert run.result is not None
    decisions = [s.decision for s in run.result.steps if s.decision and s.action]
    assert [(d.decided_by, d.confidence_source) for d in decisions] == [("model", "logprobs")] * 4
    assert all(d.confidence == pytest.approx(0.9) for d in decisions)
    assert [d.usage.input_tokens for d in decisions] == [240, 120, 240, 120]
    assert all(d.usage.counted_input_tokens > 0 for d in decisions)
    assert decisions[0].usage.counted_input_tokens > 2 * decisions[1].usage.counted_input_tokens
    # the prompts never carried the secret (input names only)
    assert all(SECRET.encode() not in raw for raw in harness.server.raw)


def test_mixed_faults_never_act_off_screen(harness: Harness) -> None:
    """Fifteen runs against a model that times out, errors, answers garbage, invents refs and
    sometimes answers well: every run ends with a terminal status, and no action in any of them
    named a ref missing from its screen."""
    faults = [
        lambda: harness.server.stall(2.0),
        lambda: harness.server.fail(503),
        lambda: harness.server.answer_raw_arguments("{oops"),
        lambda: harness.server.answer(_answer("e50")),
        lambda: harness.server.answer_text("I will press Delete account"),
        lambda: harness.server.answer(_answer("e2")),  # a field without an input
        lambda: harness.server.answer(_answer("e2=email")),
        lambda: harness.server.answer(_answer("e3")),
    ]
    statuses = []
    for i in range(15):
        for j in range(6):  # enough replies for a whole run: a mix, seeded by position
            faults[(i * 3 + j * 5) % len(faults)]()
        run = harness.run()
        statuses.append(run.status)
        assert run.status.terminal
        while harness.server.pending:  # drop what this run did not use
            harness.server._replies.popleft()
    assert {RunStatus.ERRORED, RunStatus.ESCALATED} <= set(statuses)
    harness.assert_only_refs_on_screen()
