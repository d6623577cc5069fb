"""The model decider against a real OpenAI-compatible server (llama.cpp with Gemma 3 270M).

Plumbing, not wisdom: a 270M model mostly picks the first field, and its confidence says it
is guessing. What must hold whatever it answers: every answer is one of the screen's allowed
actions or is re-asked and then escalated, never an action on an unknown ref; usage is
recorded as the server billed it and as we count it; a timeout ends the run `errored`
MODEL_UNAVAILABLE; a whole run over a sim app ends with a terminal status and acts only on
refs of the screen it saw, typing only supplied inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from testing.samples import signin_flow
from workers.core.errors import DecisionInvalidError
from workers.core.loop import run_goal
from workers.core.model import (
    ActionResult,
    DecideState,
    Decision,
    Inputs,
    InputValue,
    Platform,
    RunStatus,
    Snapshot,
)
from workers.core.params import RunParams
from workers.core.ports import Device
from workers.decide.factory import make_decider
from workers.decide.instructor import InstructorDecider
from workers.decide.options import DEFAULT_MAX_OUTPUT_TOKENS, ModelSettings
from workers.decide.prompt import actions_for
from workers.devices.sim.device import SimDevice, make_sim_device

pytestmark = pytest.mark.model_server

EMAIL = "ada@example.com"
SECRET = "llama-Secret-2718"


def _decider(server, **settings) -> InstructorDecider:
    model = ModelSettings(base_url=server.base_url, **{"timeout_s": 120, **settings})
    decider = make_decider(f"local/{server.model}", model)
    assert isinstance(decider, InstructorDecider)
    return decider


def _check_answer(state: DecideState, d: Decision) -> None:
    """The decision is one of the screen's allowed answers, made by the model."""
    answer = "done" if d.done else "blocked" if d.blocked else d.target
    if d.input != "none":
        answer = f"{d.target}={d.input}"
    assert answer in actions_for(state), (answer, actions_for(state))
    if not (d.done or d.blocked):
        assert d.target in {c.ref for c in state.candidates}
    assert d.decided_by == "model"
    assert 0.0 <= d.confidence <= 1.0


def test_every_answer_is_an_allowed_action_with_usage_and_logprob_confidence(llama_server):
    """Each sign-in screen decided once: a valid answer (or, after its re-ask, an invalid one
    raised as DecisionInvalidError), confidence from the server's logprobs, the provider's
    input and output tokens and our own count of the request all recorded."""
    decider = _decider(llama_server)
    decided = 0
    for screen in signin_flow():
        try:
            d = decider.decide(screen.state)
        except DecisionInvalidError:
            continue
        decided += 1
        _check_answer(screen.state, d)
        assert d.confidence_source == "logprobs"
        assert d.usage.input_tokens > 0  # what llama.cpp billed: the message, not the tools
        assert 0 < d.usage.output_tokens <= 2 * DEFAULT_MAX_OUTPUT_TOKENS
        assert 0 < d.usage.counted_input_tokens <= 2 * 150
    assert decided >= 1  # the grammar keeps Gemma on the enum; not one valid answer is a bug


def test_self_report_and_json_mode_validate_or_escalate(llama_server):
    """The fallback paths on the same server: the self-reported confidence (logprobs off), and
    instructor's JSON mode (response_format json_object, accepted where json_schema was a
    500). Each answer validates against the screen or ends in DecisionInvalidError (an
    answer cut at the output cap included: 24 tokens hold any answer here)."""
    state = signin_flow()[2].state
    deciders = (
        _decider(llama_server, logprobs=False, max_output_tokens=24),
        _decider(llama_server, mode="json", max_output_tokens=24),
    )
    for decider in deciders:
        try:
            d = decider.decide(state)
        except DecisionInvalidError:
            continue
        _check_answer(state, d)
        assert d.confidence_source == ("self" if decider.logprobs is False else "logprobs")
        assert d.usage.input_tokens > 0
        assert d.usage.counted_input_tokens > 0


def test_a_tiny_timeout_ends_the_run_errored_model_unavailable(llama_server):
    """A model timeout of 10 ms (no transport retries): the run ends `errored` with code
    MODEL_UNAVAILABLE after one snapshot, and the device never acts."""
    device = _Recording(make_sim_device("sim:signin-ios"))
    decider = _decider(llama_server, timeout_s=0.01, transport_retries=0)
    result = run_goal(device, "Sign in", decider=decider)
    assert result.status is RunStatus.ERRORED, result.reason
    assert result.error is not None
    assert result.error.code == "MODEL_UNAVAILABLE"
    assert "timed out" in result.reason.lower(), result.reason
    assert device.made == []


@dataclass
class _Recording(Device):
    """A DevicePort wrapper that records each snapshot's refs and each action's ref, the
    refs of the snapshot it names, and the input name of each fill."""

    inner: SimDevice
    screens: dict[str, frozenset[str]] = field(default_factory=dict)
    made: list[tuple[str, str, frozenset[str], str]] = field(default_factory=list)

    @property
    def platform(self) -> Platform:
        return self.inner.platform

    def snapshot(self) -> Snapshot:
        snap = self.inner.snapshot()
        self.screens[snap.refs_generation] = frozenset(c.ref for c in snap.candidates)
        return snap

    def _record(self, kind: str, pinned: str, input_name: str = "") -> None:
        ref, _, generation = pinned.lstrip("@").partition("~s")
        self.made.append((kind, ref, self.screens.get(generation, frozenset()), input_name))

    def press(self, pinned_ref: str) -> ActionResult:
        self._record("press", pinned_ref)
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self._record("fill", pinned_ref, value.name)
        return self.inner.fill(pinned_ref, value)

    def close(self) -> None:
        self.inner.close()


def test_a_full_run_on_the_sim_app_ends_terminal_acting_only_on_screen_refs(llama_server):
    """`run_goal` over the sim sign-in app with the model deciding (min_confidence 0 so its
    guesses are acted on): a terminal status within the step budget; every action named a ref
    of the snapshot it was chosen from, every fill typed a supplied input, no request carried
    an input value, and the run's totals hold the provider's tokens."""
    device = _Recording(make_sim_device("sim:signin-ios"))
    result = run_goal(
        device,
        "Sign in",
        decider=_decider(llama_server),
        inputs=Inputs.of({"email": EMAIL}, {"password": SECRET}),
        params=RunParams(max_steps=4, min_confidence=0.0, done_when="Welcome"),
    )
    assert result.status.terminal, result.status
    assert result.status is not RunStatus.ERRORED, result.reason
    assert 1 <= len(result.steps) <= 4
    assert device.made, "min_confidence 0: the first valid answer is acted on"
    for kind, ref, refs, input_name in device.made:
        assert ref in refs, f"{kind} {ref} not on its screen {sorted(refs)}"
        if kind == "fill":
            assert input_name in {"email", "password"}
    decisions = [s.decision for s in result.steps if s.decision and s.decision.decided_by]
    assert decisions
    assert all(d.usage.counted_input_tokens > 0 for d in decisions)
    assert result.totals.input_tokens == sum(d.usage.input_tokens for d in decisions)
    assert result.totals.input_tokens > 0
    for row in result.steps:
        if row.seen is not None:
            assert EMAIL not in row.seen.model_dump_json()
            assert SECRET not in row.seen.model_dump_json()


def test_goalfleet_eval_completes_against_the_server(
    llama_server, tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    """`goalfleet eval --decider local/<model>` runs the corpus's cases through the real
    server (a few of them: 2 cores) beside the rules decider and reports both; the model's
    accuracy is reported as measured, with no threshold — a 270M base model is not expected
    to be good. Every case gets an answer or a counted error, and model requests are counted."""
    import json  # noqa: PLC0415

    from scheduler.cli.main import main  # noqa: PLC0415
    from workers.decide.evaluate import DEFAULT_CASES  # noqa: PLC0415

    lines = DEFAULT_CASES.read_text().splitlines()
    picked = [line for line in lines if '"source": "hand"' in line][:3]
    picked += [line for line in lines if '"agent-device' in line][:2]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(picked) + "\n")
    monkeypatch.setenv("GOALFLEET_MODEL_BASE_URL", llama_server.base_url)
    monkeypatch.setenv("GOALFLEET_MODEL_TIMEOUT_S", "120")
    spec = f"local/{llama_server.model}"
    argv = ["eval", "--decider", "rules", "--decider", spec, "--cases", str(cases), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    rules, model = report["deciders"]
    assert rules["summary"]["cases"] == model["summary"]["cases"] == len(picked)
    assert rules["summary"]["calls"] == 0  # the rules decider calls no model
    answered = [c for c in model["cases"] if not c["error"]]
    assert model["summary"]["calls"] >= len(answered)
    assert all(c["billed_tokens"] > 0 and c["counted_tokens"] > 0 for c in answered)
