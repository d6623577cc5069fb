"""run_goal over SimDevice and a scripted decider: statuses, pinning, secrets, retries."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from workers.core.errors import DecisionInvalidError, ModelUnavailableError
from workers.core.loop import run_goal
from workers.core.model import (
    NONE,
    ActionKind,
    DecideState,
    Decision,
    Inputs,
    Kind,
    Outcome,
    RunResult,
    RunStatus,
    StepRow,
)
from workers.core.params import RunParams
from workers.devices.sim.device import Faults, make_sim_device

SECRET = "correct-horse-battery-staple"
INPUTS = Inputs.of({"email": "ada@example.com"}, {"password": SECRET})


class FnDecider:
    """The smallest decider: a function of the state (ScriptedDecider has more)."""

    def __init__(self, fn: Callable[[DecideState], Decision]) -> None:
        self.fn = fn
        self.states: list[DecideState] = []

    def decide(self, state: DecideState) -> Decision:
        self.states.append(state)
        return self.fn(state)


def sign_in(state: DecideState) -> Decision:
    """A competent decider for the sim sign-in apps."""
    if any("Welcome" in t for t in state.context):
        return Decision(done=True, confidence=0.95)
    for c in state.candidates:
        want = "password" if c.kind is Kind.SECURE_TEXT_FIELD else "email"
        if c.kind.fillable and want not in state.used_inputs:
            return Decision(target=c.ref, input=want, confidence=0.9)
    for name in ("Continue", "Sign in", "Verify", "Allow"):
        for c in state.candidates:
            if c.name == name:
                return Decision(target=c.ref, confidence=0.9)
    return Decision(blocked=True, reason="nothing to do")


def run(
    spec: str = "sim:signin-ios", fn: Callable[[DecideState], Decision] = sign_in, **kw: object
) -> tuple[RunResult, FnDecider]:
    decider = FnDecider(fn)
    device = make_sim_device(spec, faults=kw.pop("faults", Faults()))  # type: ignore[arg-type]
    params = RunParams(**{k: kw.pop(k) for k in list(kw) if k in RunParams.model_fields})
    result = run_goal(
        device, "Sign in", decider=decider, inputs=INPUTS, params=params, sleep=lambda _: None, **kw
    )  # type: ignore[arg-type]
    return result, decider


@pytest.mark.parametrize(
    "spec",
    [
        "sim:signin-ios",
        "sim:signin-android",
        "sim:slow-ios",
        "sim:consent-android",
        "sim:disabled-ios",
    ],
)
def test_sign_in_reaches_done_with_every_mutation_pinned(spec: str) -> None:
    """A competent decider signs in; every action is pinned to its own snapshot's generation."""
    result, _ = run(spec)
    assert result.status is RunStatus.DONE
    acted = [s for s in result.steps if s.action is not None]
    assert len(acted) >= 3
    for s in acted:
        assert s.action is not None
        assert s.action.pinned == f"@{s.action.ref}~s{s.refs_generation}"
    assert [s.index for s in result.steps] == list(range(1, len(result.steps) + 1))


def test_secret_never_reaches_decider_rows_or_result() -> None:
    """The password is typed but appears in no decide state, step row or serialised result."""
    result, decider = run()
    assert result.status is RunStatus.DONE
    assert SECRET not in result.model_dump_json()
    assert all(SECRET not in s.model_dump_json() for s in decider.states)
    fills = [s.action for s in result.steps if s.action and s.action.kind is ActionKind.FILL]
    shown = {a.input: a.shown_value for a in fills}
    # a row names an input, never holds its value, plain or secret (issue 24)
    assert shown == {"email": "{email}", "password": "**********"}
    assert all("ada@example.com" not in s.model_dump_json() for s in result.steps)


def test_decider_sees_input_names_not_values() -> None:
    result, decider = run()
    assert result.status is RunStatus.DONE
    assert decider.states[0].input_names == ("email", "password")
    assert "ada@example.com" not in decider.states[0].model_dump_json()


def test_done_when_ends_before_asking_the_decider() -> None:
    """A visible done_when marker ends the run on that snapshot, with no decide call."""
    result, decider = run(done_when="Welcome")
    assert result.status is RunStatus.DONE
    assert result.steps[-1].outcome is Outcome.DONE
    assert len(decider.states) == len(result.steps) - 1


def test_blocked_report_is_terminal() -> None:
    result, _ = run(fn=lambda s: Decision(blocked=True, reason="captcha"))
    assert result.status is RunStatus.BLOCKED
    assert result.reason == "captcha"
    assert len(result.steps) == 1


def test_low_confidence_escalates_and_records_the_decision() -> None:
    d = Decision(target="e2", input="email", confidence=0.2)
    result, _ = run(fn=lambda s: d)
    assert result.status is RunStatus.ESCALATED
    assert result.steps[-1].decision == d
    assert result.steps[-1].action is None


def test_invented_ref_is_never_acted_on() -> None:
    """A ref that is not on this screen escalates; nothing is pressed."""
    result, _ = run(fn=lambda s: Decision(target="e99", confidence=0.99))
    assert result.status is RunStatus.ESCALATED
    assert "not on this screen" in result.reason
    assert all(s.action is None for s in result.steps)


def test_unsupplied_input_is_never_typed() -> None:
    result, _ = run(fn=lambda s: Decision(target="e2", input="ssn", confidence=0.99))
    assert result.status is RunStatus.ESCALATED
    assert "did not supply" in result.reason


def test_text_field_without_input_escalates() -> None:
    result, _ = run(fn=lambda s: Decision(target="e2", input=NONE, confidence=0.99))
    assert result.status is RunStatus.ESCALATED


def test_no_target_without_done_or_blocked_escalates() -> None:
    result, _ = run(fn=lambda s: Decision(confidence=0.99))
    assert result.status is RunStatus.ESCALATED


def test_unproductive_presses_end_blocked_after_the_limit() -> None:
    """ "Create account" leads on once; "Create" (which submits nothing: its form's field is
    optional to it) then changes nothing, again and again. (A forward press with a supplied
    input untyped is no longer made at all: `test_submit_check`.)"""

    def press_create(s: DecideState) -> Decision:
        names = ("Create", "Create account")
        return Decision(target=next(c.ref for n in names for c in s.candidates if c.name == n))

    result, _ = run(fn=press_create, max_unproductive=2)
    assert result.status is RunStatus.BLOCKED
    outcomes = [s.outcome for s in result.steps]
    assert outcomes == [Outcome.ACTED] + [Outcome.UNPRODUCTIVE] * 3
    assert "changed nothing" in result.reason


def test_max_steps_ends_the_run() -> None:
    """A decider that wanders between screens runs out of steps."""

    def wander(s: DecideState) -> Decision:
        for name in ("Create account", "Forgot password?"):
            for c in s.candidates:
                if c.name == name:
                    return Decision(target=c.ref)
        return Decision(target=s.candidates[-1].ref)

    result, _ = run(fn=wander, max_steps=3)
    assert result.status is RunStatus.MAX_STEPS
    assert len(result.steps) == 3


def test_stale_ref_resnapshots_and_decides_again() -> None:
    """A stale ref on the 2nd command (first fill) is recorded and the step is redone."""
    result, decider = run(faults=Faults(stale_on=frozenset({2})))
    assert result.status is RunStatus.DONE
    assert result.steps[0].outcome is Outcome.STALE
    assert result.steps[0].error == "stale ref: ref_frame_expired"
    assert result.steps[1].outcome is Outcome.ACTED
    assert decider.states[1].history[-1].endswith("was stale; re-snapshot")


def test_repeated_stale_refs_end_errored() -> None:
    result, _ = run(faults=Faults(stale_on=frozenset(range(1, 100))))
    assert result.status is RunStatus.ERRORED
    assert result.error is not None
    assert result.error.code == "STALE_REF"
    assert len(result.steps) == 3


def test_transient_errors_are_retried() -> None:
    """DEVICE_IN_USE on a snapshot and an action is retried with backoff; the run succeeds."""
    sleeps: list[float] = []
    device = make_sim_device("sim:signin-ios", faults=Faults(transient_on=frozenset({1, 3, 4})))
    result = run_goal(
        device, "Sign in", decider=FnDecider(sign_in), inputs=INPUTS, sleep=sleeps.append
    )
    assert result.status is RunStatus.DONE
    assert sleeps == [0.05, 0.05, 0.1]


def test_persistent_transient_errors_end_errored_not_blocked() -> None:
    device = make_sim_device("sim:signin-ios", faults=Faults(transient_rate=1.0))
    result = run_goal(
        device, "Sign in", decider=FnDecider(sign_in), inputs=INPUTS, sleep=lambda _: None
    )
    assert result.status is RunStatus.ERRORED
    assert result.error is not None
    assert result.error.code == "DEVICE_IN_USE"


def test_disconnect_mid_run_is_an_infrastructure_error() -> None:
    result, _ = run(faults=Faults(disconnect_after=3))
    assert result.status is RunStatus.ERRORED
    assert result.error is not None
    assert result.error.type == "DeviceNotFoundError"
    # step 1 filled; step 2's fill hit the disconnect: it still has its row, ERRORED
    assert [s.outcome for s in result.steps] == [Outcome.ACTED, Outcome.ERRORED]
    assert "disconnected" in (result.steps[-1].error or "")


def test_empty_tree_is_an_error_not_a_screen() -> None:
    result, _ = run(faults=Faults(empty_snapshot_on=frozenset({1})))
    assert result.status is RunStatus.ERRORED
    assert result.error is not None
    assert result.error.code == "EMPTY_SNAPSHOT"


def test_decision_invalid_escalates_and_model_down_errors() -> None:
    def invalid(s: DecideState) -> Decision:
        raise DecisionInvalidError("model answered e42 twice")

    def down(s: DecideState) -> Decision:
        raise ModelUnavailableError("connection refused")

    assert run(fn=invalid)[0].status is RunStatus.ESCALATED
    down_result = run(fn=down)[0]
    assert down_result.status is RunStatus.ERRORED
    assert down_result.error is not None
    assert down_result.error.code == "MODEL_UNAVAILABLE"


def test_cancel_is_checked_between_steps() -> None:
    rows: list[StepRow] = []
    result, _ = run(on_step=rows.append, should_cancel=lambda: len(rows) >= 2)
    assert result.status is RunStatus.CANCELLED
    assert len(result.steps) == 2
    assert rows == list(result.steps)


def test_dangerous_control_escalates_instead_of_pressing() -> None:
    """Screen text tries to steer toward Delete account; the guard escalates."""

    def obey_screen(s: DecideState) -> Decision:
        return Decision(target=next(c.ref for c in s.candidates if c.name == "Delete account"))

    result, _ = run("sim:inject-ios", fn=obey_screen)
    assert result.status is RunStatus.ESCALATED
    assert "dangerous" in result.reason
    assert all(s.action is None for s in result.steps)


def test_result_round_trips_as_json() -> None:
    """A result survives JSON. Its snapshot time is the loop clock's (here one that ticks
    1 ms a read): one tick per step's snapshot, summed in the totals."""
    ticks = itertools.count()
    result, _ = run(clock=lambda: next(ticks) / 1000)
    assert RunResult.model_validate_json(result.model_dump_json()) == result
    assert [s.snapshot_ms for s in result.steps] == [1.0] * len(result.steps)
    assert result.totals.snapshot_ms == len(result.steps) * 1.0


def test_every_sim_button_leads_to_a_screen_of_its_app() -> None:
    """Found by the property test: a Sign out button led to a screen its app did not have."""
    from workers.devices.sim.apps import APPS, make_app  # noqa: PLC0415
    from workers.devices.sim.screens import WAIT_SCREEN  # noqa: PLC0415

    for name in APPS:
        app = make_app(name)
        for screen in app.screens.values():
            for el in screen.elements:
                assert el.goto is None or el.goto in app.screens or el.goto == WAIT_SCREEN.name


@pytest.mark.parametrize(
    ("words", "name", "dangerous"),
    [
        (("pay",), "Pay now", True),
        (("pay",), "Display settings", False),
        (("delete",), "DELETE ACCOUNT", True),
        (("delete", " "), "Continue", False),
        ((), "Delete account", False),
    ],
)
def test_dangerous_guard_matches_whole_words(
    words: tuple[str, ...], name: str, *, dangerous: bool
) -> None:
    from workers.core.words import word_pattern as _word_pattern  # noqa: PLC0415

    pattern = _word_pattern(words)
    assert (pattern is not None and pattern.search(name) is not None) is dangerous


def test_a_secret_is_never_typed_into_a_visible_field() -> None:
    """A decider (or a screen steering it) that puts the password into the Email field
    escalates: secrets are typed only into secure fields, where the screen hides them."""
    result, _ = run(fn=lambda s: Decision(target="e2", input="password", confidence=0.99))
    assert result.status is RunStatus.ESCALATED
    assert "not a secure field" in result.reason
    assert all(s.action is None for s in result.steps)
