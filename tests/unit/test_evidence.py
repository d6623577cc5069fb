"""A run is `done` only on evidence (`workers.core.evidence`): whoever claims it (a decider, the
decision memory), the loop checks the screen; the caller's `done_when` is the only way to
`done` when given. Driven through `run_goal` over sim apps, with deciders at our own seam."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from workers.core.chain import Tier
from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory, Remembered, memory_key
from workers.core.model import (
    ActionKind,
    DecideState,
    Decision,
    Inputs,
    RunStatus,
    StepRow,
)
from workers.core.params import RunParams
from workers.decide.rules import RulesDecider
from workers.devices.sim.apps import OTP_CODE, WRONG_CODE
from workers.devices.sim.device import make_sim_device

PHONE = "5551234567"
OTP = Inputs.of({"phone": PHONE}, {"code": OTP_CODE}, plain_fields=frozenset({"code"}))
EMAIL = "ada@example.com"
PASSWORD = "pw-of-ada-1"
SIGN_IN = Inputs.of({"email": EMAIL}, {"password": PASSWORD})


@dataclass
class ClaimsDone:
    """A decider that says `done` on every screen, as a confused model might."""

    states: list[DecideState] = field(default_factory=list)

    def decide(self, state: DecideState) -> Decision:
        self.states.append(state)
        return Decision(done=True, confidence=0.99, reason="looks signed in")


@dataclass
class ClaimsDoneAfter:
    """The rules decider, but it claims `done` from step `at` on."""

    at: int
    rules: RulesDecider = field(default_factory=RulesDecider)

    def decide(self, state: DecideState) -> Decision:
        if state.step >= self.at:
            return Decision(done=True, confidence=0.99, reason="looks signed in")
        return self.rules.decide(state)


def run(app: str, decider, inputs: Inputs = OTP, platform: str = "ios", **params):
    return run_goal(
        make_sim_device(f"sim:{app}-{platform}"),
        "Sign in",
        decider=decider,
        inputs=inputs,
        params=RunParams(**params),
        sleep=lambda _: None,
    )


# -- the outside report: a privacy dialog, then phone sign-in ---------------------------------


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_the_cookie_dialog_is_not_success_and_the_run_signs_in(platform):
    """The dialog says "keep you signed in": the rules decider presses the least it needs
    (Reject all, never Manage choices), then phone, Send code, the code, Verify: done."""
    result = run_goal(
        make_sim_device(f"sim:privacy-{platform}"),
        "Sign in",
        decider=RulesDecider(),
        inputs=OTP,
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE, result.reason
    assert result.steps[0].screen == "Your privacy"
    assert result.steps[0].outcome.value == "acted"
    assert result.steps[-1].screen == "You're in"
    pressed = [s.action.ref for s in result.steps if s.action and s.action.kind is ActionKind.PRESS]
    assert len(pressed) == 3  # Reject all, Send code, Verify
    assert result.steps[0].decision.reason.endswith("'Reject all'")


def test_done_when_is_the_only_way_to_done_when_given():
    """A decider's done claim while `done_when` is not visible is refused on every screen:
    the run never ends done, it escalates (a person looks)."""
    decider = ClaimsDone()
    result = run("privacy", decider, done_when="You're in")
    assert result.status is RunStatus.ESCALATED
    assert 'done refused: done_when "You\'re in" is not visible' in result.reason
    assert all(s.outcome.value != "done" for s in result.steps)


def test_done_when_visible_ends_done_without_asking():
    result = run("privacy", RulesDecider(), done_when="You're in")
    assert result.status is RunStatus.DONE
    assert result.reason == '"You\'re in" is visible'


def test_a_false_done_on_the_consent_screen_is_refused():
    """The run's first screen is a cookie dialog: a done claim there is no evidence."""
    result = run("privacy", ClaimsDone())
    assert result.status is RunStatus.ESCALATED
    assert result.reason == "done refused: a consent dialog is in the way"
    assert len(result.steps) == 1


def test_a_false_done_on_the_arrival_screen_is_refused():
    """The sign-in app's first screen (no dialog) still offers Continue: not done."""
    result = run("signin", ClaimsDone(), inputs=Inputs())
    assert result.status is RunStatus.ESCALATED
    assert "the screen the run arrived on and it offers" in result.reason


def test_a_false_done_with_an_empty_required_field_is_refused():
    """On the code screen (not the first), the code not typed yet, its field empty: the
    claim is refused, and the reason quotes no value."""
    result = run("privacy", ClaimsDoneAfter(at=4))
    assert result.status is RunStatus.ESCALATED
    assert result.reason == (
        "done refused: input 'code' is not typed yet and 'Verification code' is empty"
    )
    assert result.steps[-1].screen == "Enter the code we sent you"


def test_a_done_claim_on_the_success_screen_is_accepted():
    """Evidence, not suspicion: the same claim on the last screen ends the run done."""
    result = run("privacy", ClaimsDoneAfter(at=6))
    assert result.status is RunStatus.DONE, result.reason
    assert result.steps[-1].screen == "You're in"


def test_the_chain_gets_the_refused_claim():
    """A refused done is an escalation cause: the next decider of the chain is asked in the
    same step, and its answer carries the run on."""
    result = run_goal(
        make_sim_device("sim:privacy-ios"),
        "Sign in",
        decider=ClaimsDone(),
        escalate_to=[Tier("rules", RulesDecider())],
        inputs=OTP,
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE
    first = result.steps[0]
    assert [a.decider for a in first.attempts] == ["decider", "rules"]
    assert first.attempts[0].escalated == "done refused: a consent dialog is in the way"


# -- memory never learns, nor ends a run with, an unverified done -----------------------------


def test_memory_holds_no_refused_done_and_a_remembered_done_is_checked():
    memory = InMemoryMemory()
    refused = run_goal(
        make_sim_device("sim:privacy-ios"),
        "Sign in",
        decider=ClaimsDone(),
        inputs=OTP,
        memory=memory,
        sleep=lambda _: None,
    )
    assert refused.status is RunStatus.ESCALATED
    assert not [e for e in memory.entries.values() if e.done]
    assert memory.entries == {}  # an escalated run teaches nothing

    # an entry from before this check (or another fleet) that says done on the dialog
    first = refused.steps[0].seen
    assert first is not None
    key = memory_key(first, memory.decider)
    memory.entries[key] = Remembered(key=key, done=True, source="rules", origin="rules")
    result = run_goal(
        make_sim_device("sim:privacy-ios"),
        "Sign in",
        decider=RulesDecider(),
        inputs=OTP,
        memory=memory,
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE
    assert result.steps[0].memory.outcome == "invalidated"
    assert result.steps[0].memory.why == (
        "its done is not corroborated: a consent dialog is in the way"
    )
    assert (key, result.steps[0].memory.why) in memory.invalidated
    dones = [e for e in memory.entries.values() if e.done]
    assert [e.screen for e in dones] == ["You're in"]  # the one verified done


# -- one-time codes: a secret into a plain field by consent; a wrong code -------------------


def test_a_secret_code_needs_the_callers_consent_for_a_plain_field():
    without = Inputs.of({"phone": PHONE}, {"code": OTP_CODE})
    result = run("privacy", RulesDecider(), inputs=without)
    assert result.status is RunStatus.ESCALATED
    assert "not a secure field" in result.reason
    assert "plain_field: true" in result.reason


def test_a_wrong_code_is_blocked_with_the_banner_after_one_verify():
    wrong = Inputs.of(
        {"phone": PHONE, "email": EMAIL}, {"code": "135790"}, plain_fields=frozenset({"code"})
    )
    result = run("privacy", RulesDecider(), inputs=wrong)
    assert result.status is RunStatus.BLOCKED
    assert WRONG_CODE in result.reason
    verify = [
        s
        for s in result.steps
        if s.action and s.action.kind is ActionKind.PRESS and s.screen.startswith("Enter the code")
    ]
    assert len(verify) == 1


# -- no typed value in any row field ---------------------------------------------------------


def _strings(value: object) -> list[str]:
    """Every string inside a row, field by field, however deep."""
    if isinstance(value, BaseModel):
        return [s for name in type(value).model_fields for s in _strings(getattr(value, name))]
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple | set | frozenset):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize(
    ("app", "inputs", "values"),
    [
        ("privacy", OTP, (PHONE, OTP_CODE)),
        ("signin", SIGN_IN, (EMAIL, PASSWORD)),
        ("login", SIGN_IN, (EMAIL, PASSWORD)),  # quotes the email in its error banner
    ],
)
def test_no_typed_value_reaches_any_row_field(app, inputs, values):
    result = run(app, RulesDecider(), inputs=inputs)
    strings = [s for row in result.steps for s in _strings(row)]
    assert strings, "the rows hold text"
    for value in values:
        assert not [s for s in strings if value in s], f"{value!r} is in a step row"
        assert value not in result.reason
    fills = [s.action for s in result.steps if s.action and s.action.kind is ActionKind.FILL]
    assert fills
    assert all(a.shown_value in {"{" + a.input + "}", "**********"} for a in fills)
    assert all(isinstance(row, StepRow) for row in result.steps)


# -- evidence from the screen, not from the chrome (issue 42) ---------------------------------


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_a_consent_word_in_the_application_or_window_name_does_not_refuse_done(platform):
    """The sign-in app runs as `cookie-consent-demo` in a window titled "Allow notifications ·
    Privacy": those names are chrome, not a dialog on screen. The run signs in and ends `done`
    (it ended `escalated`, "done refused: a consent dialog is in the way")."""
    result = run("chrome", RulesDecider(), SIGN_IN, platform)
    assert result.status is RunStatus.DONE, result.reason
    assert result.steps[-1].screen == "Welcome"


def test_a_cookie_notice_in_the_content_still_refuses_done():
    """The chrome is ignored, the content is not: a done claim on the privacy app's first
    screen (its cookie notice is a text on screen) is still refused."""
    result = run("privacy", ClaimsDone())
    assert result.status is RunStatus.ESCALATED
    assert "done refused: a consent dialog is in the way" in result.reason
