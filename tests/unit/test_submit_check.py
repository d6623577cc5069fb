"""The loop's verdicts on the user's app, not ours (issue 42, items 2, 3 and 5), on sim apps:

- no submit while a supplied input has nowhere to go or a needed one is missing, whoever
  decided the press (`workers.core.fields`);
- the next forward choice when one changes nothing (a cookie dialog whose "Reject all" is a
  dead end), and memory keeps the one that advanced;
- errors that say the cause: the app's window closed after a step; a tree with no enabled
  control.

Ground truth is the sim app's own state (what it received, where it is), not the rows."""

from __future__ import annotations

import pytest
from simkit import RecordingSim

from workers.core.chain import Tier
from workers.core.fields import unready
from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory
from workers.core.model import DecideState, Decision, Inputs, Node, Outcome, RunStatus
from workers.core.projection import build_snapshot
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import SimDevice, make_sim_device
from workers.devices.sim.screens import App, Element, titled

EMAIL = "ada@example.com"
PASSWORD = "pw-5417-opal"
PLATFORMS = ["ios", "android"]


def _run(spec: str, decider: object, inputs: Inputs, **kw: object) -> tuple[object, RecordingSim]:
    device = RecordingSim(make_sim_device(spec))
    result = run_goal(device, "Sign in", decider=decider, inputs=inputs, **kw)  # type: ignore[arg-type]
    return result, device


# -- 2. never a wrong press ------------------------------------------------------------------


@pytest.mark.parametrize("platform", PLATFORMS)
def test_signin_without_the_secret_ends_blocked_before_sign_in(platform: str) -> None:
    """The sim sign-in with an email and no password: the rules decider wants "Sign in" over
    the empty password field; the loop ends the run `blocked` naming the field and the input,
    and "Sign in" is never pressed (the app shows no "Enter your password")."""
    result, device = _run(f"sim:signin-{platform}", RulesDecider(), Inputs.of({"email": EMAIL}))
    assert result.status is RunStatus.BLOCKED  # type: ignore[attr-defined]
    assert result.reason == (  # type: ignore[attr-defined]
        "this screen asks for 'Password'; no input named password was supplied"
    )
    assert device.presses("sign_in") == 0
    assert device.inner.screen == "password"
    assert "error" not in [element for element, *_ in device.inner.shown()]  # no app error


@pytest.mark.parametrize("platform", PLATFORMS)
def test_unnamed_form_without_the_secret_ends_blocked_naming_the_field(platform: str) -> None:
    """A form whose entries have no accessible name: the e-mail goes into the entry the
    "E-mail" text labels, and "OK" is never pressed over the empty entry "Password" labels."""
    result, device = _run(f"sim:unnamed-{platform}", RulesDecider(), Inputs.of({"email": EMAIL}))
    assert result.status is RunStatus.BLOCKED  # type: ignore[attr-defined]
    assert result.reason == (  # type: ignore[attr-defined]
        "this screen asks for 'Password' (the label beside it); no input named password was "
        "supplied"
    )
    assert device.presses("ok") == 0
    assert device.inner.values == {"email": EMAIL}  # what the app received, where it belongs


def test_a_model_like_decider_is_held_to_it_too() -> None:
    """Not a rule of the rules decider: a decider that presses "Continue" at once, with the
    email supplied and untyped, escalates (to the next decider: it fills first, and the run
    goes on); alone, it ends `escalated` with nothing pressed."""

    def hasty(state: DecideState) -> Decision:
        go = [c for c in state.candidates if c.name in {"Continue", "Sign in"}]
        return Decision(target=go[0].ref, confidence=0.9) if go else Decision(done=True)

    class Fn:
        def decide(self, state: DecideState) -> Decision:
            return hasty(state)

    inputs = Inputs.of({"email": EMAIL}, {"password": PASSWORD})
    alone, device = _run("sim:signin-ios", Fn(), inputs)
    assert alone.status is RunStatus.ESCALATED  # type: ignore[attr-defined]
    assert alone.reason == (  # type: ignore[attr-defined]
        "'Continue' would submit with 'Email' empty, which input 'email' fills: fill it first"
    )
    assert device.made() == []

    chained, device = _run(
        "sim:signin-ios", Fn(), inputs, escalate_to=(Tier("rules", RulesDecider()),)
    )
    assert chained.status is RunStatus.DONE  # type: ignore[attr-defined]
    assert device.inner.values == {"email": EMAIL, "password": PASSWORD}


def test_two_nameless_entries_escalate_rather_than_guess() -> None:
    """Two entries with no name and nothing beside them: which takes the e-mail is a guess.
    With the password typed into the secure one, "OK" over the other escalates."""
    snap = build_snapshot(
        [
            Node(ref="e1", type="TextField", role="text"),
            Node(ref="e2", type="TextField", role="password text"),
            Node(ref="e3", type="Button", role="push button", label="OK"),
        ],
        "1",
    )
    state = DecideState(
        goal="Sign in",
        step=2,
        candidates=snap.candidates,
        context=snap.context,
        input_names=("email", "password"),
        used_inputs=("password",),
    )
    found = unready(Decision(target="e3"), snap, state, typed=frozenset({"e2"}))
    assert found is not None
    assert not found.blocked
    assert found.why == (
        "cannot tell which field takes input 'email': an unnamed text-field (e1) has no name "
        "of its own and takes none of the inputs; a person should say"
    )


# -- 3. the next choice when one does nothing ------------------------------------------------


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_dead_end_consent_choice_is_followed_by_the_next(platform: str) -> None:
    """ "Reject all" changes nothing in this app: the rules decider tries "Accept all" next
    (the row says why) and the run ends `done`; memory keeps "Accept all", so the next run
    presses it first and never the dead end."""
    inputs = Inputs.of({"email": EMAIL}, {"password": PASSWORD})
    memory = InMemoryMemory("rules")
    result, device = _run(f"sim:deadend-{platform}", RulesDecider(), inputs, memory=memory)
    assert result.status is RunStatus.DONE  # type: ignore[attr-defined]
    assert device.inner.screen == "welcome"
    first, second = result.steps[:2]  # type: ignore[attr-defined]
    assert first.outcome is Outcome.UNPRODUCTIVE
    assert second.outcome is Outcome.ACTED
    assert second.decision.reason == (
        "a consent dialog is in the way: press 'Accept all'; 'Reject all' changed nothing"
    )
    assert [a.element for a in device.made()[:2]] == ["reject", "accept"]

    again, device = _run(f"sim:deadend-{platform}", RulesDecider(), inputs, memory=memory)
    assert again.status is RunStatus.DONE  # type: ignore[attr-defined]
    assert device.made()[0].element == "accept"
    assert device.presses("reject") == 0
    assert again.steps[0].memory is not None  # type: ignore[attr-defined]
    assert again.steps[0].memory.outcome == "hit"  # type: ignore[attr-defined]


def test_every_choice_a_dead_end_ends_blocked() -> None:
    """When no forward choice changes anything, each is tried once, then `blocked`."""
    stuck = titled(
        "cookies",
        "We use cookies",
        Element("button", "Reject all", "reject"),
        Element("button", "Accept all", "accept"),
    )
    device = RecordingSim(SimDevice(App("stuck", "cookies", {"cookies": stuck})))
    result = run_goal(device, "Sign in", decider=RulesDecider(), inputs=Inputs())
    assert result.status is RunStatus.BLOCKED
    assert [a.element for a in device.made()] == ["reject", "accept"]


# -- 5. errors that say the cause --------------------------------------------------------------


def test_a_window_that_closes_after_the_submit_is_said_so() -> None:
    """The dialog ends on "OK" (its window goes): the run ends `errored` with "the app's
    window closed after step 3 (pressed 'OK')", not an accessibility-stack hint; and the app
    received the e-mail in the e-mail entry (its labels are only beside the entries)."""
    inputs = Inputs.of({"email": EMAIL}, {"password": PASSWORD})
    result, device = _run("sim:unnamed-ios", RulesDecider(), inputs)
    assert result.status is RunStatus.ERRORED  # type: ignore[attr-defined]
    assert result.reason == "the app's window closed after step 3 (pressed 'OK')"  # type: ignore[attr-defined]
    assert result.error.code == "APP_CLOSED"  # type: ignore[attr-defined]
    assert "DBUS" not in result.model_dump_json()  # type: ignore[attr-defined]
    assert device.inner.values == {"email": EMAIL, "password": PASSWORD}


def test_a_tree_with_no_enabled_control_says_so() -> None:
    """Every control disabled (as a GTK 4 app showed over AT-SPI): `blocked`, and the reason
    gives the counts and what to check."""
    never = Element("button", "Sign in", "go", requires=("absent",), disabled_until_valid=True)
    screen = titled("dead", "Sign in to Acme", never)
    result = run_goal(
        SimDevice(App("dead", "dead", {"dead": screen})),
        "Sign in",
        decider=RulesDecider(),
        inputs=Inputs(),
    )
    assert result.status is RunStatus.BLOCKED
    assert result.reason.endswith(
        "; the accessibility tree has 2 nodes, 1 of them controls, none enabled and hittable: "
        "the app's toolkit may not report its controls' state to the accessibility bus (seen "
        "with GTK 4) — check the app answers a person's clicks, and that its toolkit's "
        "accessibility support is on"
    )
