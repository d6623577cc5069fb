"""One vocabulary, one visibility predicate (`workers.core.words`): the done-check
(`workers.core.evidence`) and the rules decider read a screen with the same words and the same
idea of what is on it, so they cannot disagree about one screen — and neither reads the chrome
(the application's name, the window's title) as the screen's text."""

from __future__ import annotations

import pytest

from workers.core import evidence
from workers.core.model import DecideState, Node, Snapshot
from workers.core.projection import build_snapshot
from workers.decide.rules import RulesDecider


def _screen(*nodes: tuple[str, str]) -> Snapshot:
    """A snapshot of iOS nodes given as (XCUI type suffix, label)."""
    return build_snapshot(
        [
            Node(ref=f"e{i}", type=f"XCUIElementType{t}", label=label)
            for i, (t, label) in enumerate(nodes, start=1)
        ],
        "1",
    )


def _state(snap: Snapshot, *, done_when: str | None = None) -> DecideState:
    """What the loop tells a decider about `snap`, every input already typed."""
    return DecideState(
        goal="Sign in",
        step=3,
        candidates=snap.candidates,
        context=snap.context,
        input_names=("email", "password"),
        used_inputs=("email", "password"),
        done_when=done_when,
        screen=snap.screen,
    )


@pytest.mark.parametrize("word", ["Weiter", "Fortfahren", "Bestätigen", "Get code", "Go"])
def test_a_forward_word_of_the_decider_is_one_for_the_done_check(word: str) -> None:
    """A German (or any) forward word the rules decider presses is one the done-check sees:
    on the run's first screen, "Willkommen" above "Weiter" is not the goal reached. (Two
    FORWARD lists had drifted: the decider pressed "Weiter" while the done-check would have
    accepted a done claim on the same screen.)"""
    snap = _screen(("StaticText", "Willkommen"), ("Button", word))
    decision = RulesDecider().decide(_state(snap))
    assert decision.target == "e2", decision.reason  # the decider goes on through it
    refused = evidence.refusal(snap, _state(snap), arrival=True)
    assert refused == f"it is the screen the run arrived on and it offers {word!r}"


def test_the_chrome_is_not_on_the_screen_for_either_reader() -> None:
    """A window titled "Welcome back" around a sign-in form: neither the loop's `shows` (the
    done_when check) nor the rules decider sees "Welcome back"; both see the form's title."""
    snap = _screen(
        ("Application", "acme-welcome-back"),
        ("Window", "Welcome back"),
        ("StaticText", "Sign in to Acme"),
        ("Button", "Continue"),
    )
    assert not snap.shows("Welcome back")
    assert not snap.shows("acme-welcome-back")
    assert snap.shows("sign in to acme")
    assert snap.shows("continue")
    rules = RulesDecider()
    assert not rules.decide(_state(snap, done_when="Welcome back")).done
    assert rules.decide(_state(snap, done_when="Sign in to Acme")).done


def test_a_control_s_name_is_not_a_dialog_s_text() -> None:
    """A permission prompt or a consent notice is told by what the screen says, not by what a
    control is called: a password form with an "Enable Face ID" switch is filled, and a
    signed-in screen with an "Allow notifications" switch is where a sign-in ends."""
    form = build_snapshot(
        [
            Node(ref="e1", type="XCUIElementTypeStaticText", label="Enter your password"),
            Node(ref="e2", type="XCUIElementTypeSecureTextField", label="Password"),
            Node(ref="e3", type="XCUIElementTypeSwitch", label="Enable Face ID", value="0"),
            Node(ref="e4", type="XCUIElementTypeButton", label="Continue"),
        ],
        "1",
    )
    state = _state(form).model_copy(update={"used_inputs": ("email",)})
    decision = RulesDecider().decide(state)
    assert (decision.target, decision.input) == ("e2", "password"), decision.reason
    home = _screen(("StaticText", "Welcome"), ("Switch", "Allow notifications"))
    assert evidence.refusal(home, _state(home), arrival=False) is None
    assert RulesDecider().decide(_state(home)).done
