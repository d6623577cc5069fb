"""No repeated submits (issue 10, point 6), on the sim `login` app: email → Next → password →
Log in, where a wrong password shows an error and stays on the screen (its field cleared).

Whatever the decider (scripted, a chain, the decision memory), the loop presses a control at
most once on a screen where pressing it changed nothing or brought up an error, submits
credentials at most once per screen, ends `blocked` with the (scrubbed) error text when a
submit brings one up, and never re-types what a field already holds."""

from __future__ import annotations

import pytest
from simkit import ErrorBlind, RecordingSim

from workers.core.chain import Tier
from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory
from workers.core.model import Decision, Inputs, Outcome, RunResult, RunStatus
from workers.core.params import RunParams
from workers.decide.rules import RulesDecider
from workers.decide.scripted import ScriptedDecider, fill, press
from workers.devices.sim.apps import LOGIN_PASSWORD, REFUSED_LOG_IN
from workers.devices.sim.device import make_sim_device

EMAIL = "ada@example.com"
WRONG = "not-the-password-9"
SCRUBBED_ERROR = REFUSED_LOG_IN
"""The screen quotes the email in its error; the run's reason shows it as {email}."""
PLATFORMS = ["ios", "android"]


def _inputs(password: str | None = WRONG) -> Inputs:
    return Inputs.of({"email": EMAIL}, {"password": password} if password else None)


def _run(
    platform: str,
    decider: ScriptedDecider | RulesDecider,
    *,
    password: str | None = WRONG,
    blind: bool = False,
    **kw: object,
) -> tuple[RunResult, RecordingSim]:
    device = RecordingSim(make_sim_device(f"sim:login-{platform}"))
    port = ErrorBlind(device) if blind else device
    result = run_goal(
        port,
        "Log in",
        decider=decider,
        inputs=_inputs(password),
        params=RunParams(max_steps=12),
        sleep=lambda _: None,
        **kw,  # type: ignore[arg-type]
    )
    return result, device


def _to_password_screen() -> list[object]:
    return [fill("Email", "email"), press("Next"), fill("Password", "password")]


def _leaks(result: RunResult, decider: ScriptedDecider) -> list[str]:
    """Where the secret shows anywhere in the result or what the decider was told, or the
    email in the reason or the decider's states (step rows may show a plain input's value)."""
    told = [s.model_dump_json() for s in decider.seen]
    secret = [t for t in [result.model_dump_json(), *told] if WRONG in t]
    return secret + [t for t in [result.reason, *told] if EMAIL in t]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_login_app_signs_in_with_the_right_password(platform: str) -> None:
    """The app itself: the rules decider gets through with the password it accepts, and no
    rule stops a run that repeats nothing."""
    result, device = _run(platform, RulesDecider(), password=LOGIN_PASSWORD)
    assert result.status is RunStatus.DONE, result.reason
    assert device.presses("log_in") == 1


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_wrong_password_is_submitted_once_and_the_run_ends_blocked_with_the_error(
    platform: str,
) -> None:
    """A decider that keeps pressing Log in: one press, then `blocked` with the screen's error
    text (the email it quotes scrubbed) — never a second log-in attempt."""
    decider = ScriptedDecider(_to_password_screen(), then=press("Log in"))
    result, device = _run(platform, decider)
    assert result.status is RunStatus.BLOCKED
    assert SCRUBBED_ERROR in result.reason
    assert device.presses("log_in") == 1
    assert device.fills("password") == 1
    assert result.steps[-1].outcome is Outcome.BLOCKED
    assert _leaks(result, decider) == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_decider_that_keeps_filling_the_same_email_types_it_once(platform: str) -> None:
    """The same email into the same field again is refused (no device action); the refusals
    count as steps that changed nothing, so the run ends blocked, saying why."""
    decider = ScriptedDecider(fill("Email", "email"))
    result, device = _run(platform, decider)
    assert device.fills("email") == 1
    assert result.status is RunStatus.BLOCKED
    assert "already holds {email}" in result.reason
    assert all(s.action is None for s in result.steps[1:])
    assert "already holds {email}" in decider.seen[-1].history[-1]  # the decider is told
    assert _leaks(result, decider) == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_no_password_given_never_presses_log_in(platform: str) -> None:
    """Without a password, a decider that wants Log in over the empty password field is
    stopped before the press: the run ends blocked naming the field and the missing input
    (it used to press Log in and end on the app's "Enter your password", which it blamed on
    "every input typed")."""
    decider = ScriptedDecider([fill("Email", "email"), press("Next")], then=press("Log in"))
    result, device = _run(platform, decider, password=None)
    assert device.presses("log_in") == 0
    assert result.status is RunStatus.BLOCKED
    assert result.reason == (
        "this screen asks for 'Password'; no input named password was supplied"
    )
    assert result.steps[-1].error == result.reason
    assert _leaks(result, decider) == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_second_submit_on_the_same_screen_is_refused_when_no_error_is_visible(
    platform: str,
) -> None:
    """The loop cannot see the error: the password field comes back empty, the decider types
    it again (allowed: the field no longer holds it) and presses Log in again — refused, as
    a credential submit is made once per screen."""
    decider = ScriptedDecider(
        [*_to_password_screen(), press("Log in"), fill("Password", "password")],
        then=press("Log in"),
    )
    result, device = _run(platform, decider, blind=True)
    assert device.presses("log_in") == 1
    assert device.fills("password") == 2
    assert result.status is RunStatus.BLOCKED
    assert "credentials" in result.reason
    assert _leaks(result, decider) == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_rules_hold_for_the_answer_of_a_chain(platform: str) -> None:
    """The first decider is never sure (every step escalates to the second), the second keeps
    pressing Log in: still one press."""
    unsure = ScriptedDecider(lambda _: Decision(confidence=0.1))
    second = ScriptedDecider(_to_password_screen(), then=press("Log in"))
    result, device = _run(
        platform, unsure, escalate_to=(Tier("second", second),), decider_name="unsure"
    )
    assert device.presses("log_in") == 1
    assert result.status is RunStatus.BLOCKED
    assert SCRUBBED_ERROR in result.reason


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_remembered_submit_is_not_repeated(platform: str) -> None:
    """The decision memory learns Log in from a run with the right password; a run with a
    wrong one, whose error the loop cannot see, recalls Log in on the same screen again after
    retyping: refused (the memory is not replayed into a second attempt), and the decider —
    which also wants Log in — is refused too."""
    memory = InMemoryMemory("rules")
    learned, _ = _run(platform, RulesDecider(), password=LOGIN_PASSWORD, memory=memory)
    assert learned.status is RunStatus.DONE
    result, device = _run(platform, RulesDecider(), blind=True, memory=memory)
    assert device.presses("log_in") == 1
    assert result.status is RunStatus.BLOCKED
    hits = [s for s in result.steps if s.memory and s.memory.outcome == "hit"]
    assert hits, "the run did use the memory"
