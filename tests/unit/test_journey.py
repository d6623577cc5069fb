"""Journeys (issue 43, items 1 and 4): steps in order on one device in one run. The done-when
journey passes on the iOS and Android sims, every row carrying its step; the run's status is
the first step that did not pass, named; a natural-language check holds only on evidence it
cites from the screen; a device that cannot do a step's action refuses the journey before the
first step; the second round of a journey is decided from memory (0 model calls, counted
from the rows)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from journeykit import EMAIL, JOURNEY, PASSWORD

from workers.core.chain import Tier
from workers.core.cost import PriceTable
from workers.core.journey import in_view, on_screen, run_journey
from workers.core.memory import InMemoryMemory
from workers.core.model import (
    DecideState,
    Decision,
    Inputs,
    Node,
    RunResult,
    RunStatus,
    TokenUsage,
)
from workers.core.params import RunParams
from workers.core.ports import DeviceAction
from workers.core.prices import Price
from workers.core.projection import build_snapshot
from workers.core.request import GoalRunRequest, JourneyStep
from workers.decide.rules import RulesDecider
from workers.decide.scripted import ScriptedDecider
from workers.devices.sim.device import Faults, SimDevice, make_sim_device

INPUTS = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})


def steps(*raw: Any) -> list[JourneyStep]:
    return list(GoalRunRequest.model_validate({"steps": list(raw)}).steps or [])


def journey(device: SimDevice, raw: list[Any], decider: Any = None, **kw: Any) -> RunResult:
    return run_journey(
        device,
        "a journey",
        steps=steps(*raw),
        decider=decider or RulesDecider(),
        inputs=INPUTS,
        **kw,
    )


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_the_done_when_journey_passes_and_each_row_carries_its_step(platform: str) -> None:
    """Sign in (the loop) → press Settings → scroll until Appearance → press it → Dark mode
    → back → back → "Theme: Dark" is visible: done, every step passed, rows numbered on
    across steps, each with its step's index, title and who decided it."""
    result = journey(make_sim_device(f"sim:settings-{platform}"), JOURNEY)
    assert (result.status, result.reason) == (RunStatus.DONE, "all 8 steps passed")
    assert [j.passed for j in result.journey] == [True] * 8
    assert [r.index for r in result.steps] == list(range(1, len(result.steps) + 1))
    assert {r.journey_step for r in result.steps} == set(range(1, 9))
    by_step = {j.index: j for j in result.journey}
    assert by_step[1].source == "rules"  # the rules decider signed in
    assert by_step[3].rows == 3  # two scrolls, then Appearance is visible
    assert by_step[5].title == "dark mode on"
    assert [j.source for j in result.journey][1:7] == ["plain"] * 6
    assert by_step[8].source == "rules"
    assert PASSWORD not in result.model_dump_json()


def test_a_false_check_fails_the_journey_naming_the_step() -> None:
    """Dark mode never turned on: the check fails, the run ends blocked naming step 4 and why;
    the steps after it are not reached."""
    raw = [*JOURNEY[:2], "back", {"name": "theme is dark", "check": '"Theme: Dark" is visible'}]
    raw.append({"press": "Settings"})
    result = journey(make_sim_device("sim:settings-ios"), raw)
    assert result.status is RunStatus.BLOCKED
    assert result.reason == "step 4 (theme is dark) did not pass: 'Theme: Dark' is not visible"
    assert [j.passed for j in result.journey] == [True, True, True, False, None]
    assert result.steps[-1].journey_step == 4


def test_a_not_visible_check_holds_when_the_text_is_absent() -> None:
    """`"X" is not visible` holds on a screen without X, fails on one with it."""
    ok = journey(make_sim_device("sim:settings-ios"), [{"check": '"Welcome" is not visible'}])
    assert ok.status is RunStatus.DONE
    shown = journey(make_sim_device("sim:settings-ios"), [{"check": '"Email" is not visible'}])
    assert shown.status is RunStatus.BLOCKED


def _answer(reason: str, *, done: bool = True, cite: str = "") -> ScriptedDecider:
    def decide(state: DecideState) -> Decision:
        ref = next((c.ref for c in state.candidates if c.name == cite), "none")
        return Decision(done=done, target=ref, reason=reason, decided_by="model")

    return ScriptedDecider(decide)


@pytest.mark.parametrize(
    ("decider", "holds"),
    [
        (_answer("yes, it does"), False),  # claims true, cites nothing
        (_answer("the screen says 'Forgot your keys?'"), False),  # quotes what is not there
        (_answer("the 'Sign in to Acme' title says so"), True),  # quotes the screen
        (_answer("this field", cite="Email"), True),  # cites an element of the screen
        (_answer("no", done=False), False),
    ],
)
def test_a_natural_language_check_holds_only_on_cited_evidence(
    decider: ScriptedDecider,
    holds: bool,  # noqa: FBT001 - pytest's parameter
) -> None:
    """One narrow question to the decider; a yes without on-screen evidence fails the check."""
    result = journey(
        make_sim_device("sim:settings-ios"),
        [{"check": "the sign-in form asks for an email"}],
        decider,
    )
    assert (result.status is RunStatus.DONE) is holds, result.reason
    assert len(decider.seen) == 1
    assert decider.seen[0].goal.startswith("Check, do not act")
    if not holds and "cited nothing" in result.reason:
        assert result.reason.endswith("the decider said it holds but cited nothing on the screen")
    assert result.journey[0].source == "model"


class NoScroll(SimDevice):
    def actions(self) -> frozenset[DeviceAction]:
        return super().actions() - {"scroll"}


def test_a_device_that_cannot_scroll_refuses_the_journey_before_it_starts() -> None:
    """The flow needs scroll; this device cannot: the run ends errored with the reason before
    any command reaches the device."""
    base = make_sim_device("sim:settings-ios")
    dev = NoScroll(app=base.app)
    result = journey(dev, JOURNEY)
    assert result.status is RunStatus.ERRORED
    assert result.reason.startswith("step 3 (3. scroll down until Appearance) needs scroll")
    assert "this device cannot scroll" in result.reason
    assert result.error is not None
    assert (result.error.type, result.error.code) == (
        "UnsupportedActionError",
        "UNSUPPORTED_ACTION",
    )
    assert result.error.device_fault is False  # the flow asks too much, the device is fine
    assert (result.steps, dev.commands) == ((), 0)
    assert [j.passed for j in result.journey] == [None] * 8


class Model:
    """A stand-in for a model at the decider seam: the rules' answers, said by a "model"; a
    check answered by citing the Dark mode switch. Counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.rules = RulesDecider()

    def decide(self, state: DecideState) -> Decision:
        self.calls += 1
        if state.goal.startswith("Check"):
            ref = next(c.ref for c in state.candidates if c.name == "Dark mode")
            return Decision(done=True, target=ref, reason="the switch", decided_by="model")
        return self.rules.decide(state).model_copy(update={"decided_by": "model"})


MEMORY_JOURNEY = [*JOURNEY[:5], {"check": "dark mode is on"}, *JOURNEY[5:]]


def test_the_second_round_is_decided_from_memory() -> None:
    """Round one on iOS and Android asks the model (goal and natural-language check); round
    two on fresh devices decides every goal and check step from memory: 0 model calls,
    counted from the rows, and the model was not asked."""
    memory, model = InMemoryMemory(decider="openai/stand-in"), Model()

    def round_() -> list[RunResult]:
        return [
            journey(make_sim_device(f"sim:settings-{p}"), MEMORY_JOURNEY, model, memory=memory)
            for p in ("ios", "android")
        ]

    first = round_()
    assert all(r.status is RunStatus.DONE for r in first), [r.reason for r in first]
    assert sum(j.decider_calls for r in first for j in r.journey) == model.calls > 0
    assert first[0].journey[0].source == "model"
    asked = model.calls
    second = round_()
    assert all(r.status is RunStatus.DONE for r in second), [r.reason for r in second]
    assert model.calls == asked
    assert sum(r.source == "model" for run in second for r in run.steps) == 0
    for run in second:
        labels = [j.source for j in run.journey]
        assert labels == ["memory", *["plain"] * 4, "memory", "plain", "plain", "rules"]


def test_scroll_until_counts_a_control_out_of_view_as_not_visible() -> None:
    """AT-SPI reports a scrolled list's rows out of view (not hittable) with their labels:
    `scroll until` waits for the row to be on screen, not merely in the tree."""
    nodes = [
        Node(ref="e1", type="Button", label="Row 1", enabled=True, hittable=True),
        Node(ref="e2", type="Button", label="Row 30", enabled=True, hittable=False),
        Node(ref="e3", type="StaticText", label="Rows"),
    ]
    snap = build_snapshot(nodes, "7")
    assert "Row 30" in [n.label for n in snap.nodes]  # in the tree
    assert not in_view(snap, "Row 30")
    assert not on_screen(snap, "Row 30")
    assert in_view(snap, "Row 1")
    assert not in_view(snap, "Rows")  # a text, while a control is out of view: not trusted
    in_sim = build_snapshot(nodes[:1] + nodes[2:], "8")
    assert in_view(in_sim, "Rows")
    assert on_screen(snap, "Row 1")  # a check may name a control on screen
    assert on_screen(snap, "Rows")


def _retitled(device: SimDevice, screen: str, title: str) -> SimDevice:
    """`device` whose `screen` has another title (a label changed in a new build)."""
    old = device.app.screens[screen]
    first = dataclasses.replace(old.elements[0], label=title)
    new = dataclasses.replace(old, elements=(first, *old.elements[1:]))
    device.app = dataclasses.replace(device.app, screens={**device.app.screens, screen: new})
    return device


def test_a_changed_screen_re_asks_exactly_its_step() -> None:
    """After a round from the model, the Appearance screen's title changes: the natural-
    language check on it asks the model again (1 call), every other step stays memory or
    plain."""
    memory, model = InMemoryMemory(decider="openai/stand-in"), Model()
    first = journey(make_sim_device("sim:settings-ios"), MEMORY_JOURNEY, model, memory=memory)
    assert first.status is RunStatus.DONE, first.reason
    asked = model.calls
    changed = _retitled(make_sim_device("sim:settings-ios"), "appearance", "Look and feel")
    again = journey(changed, MEMORY_JOURNEY, model, memory=memory)
    assert again.status is RunStatus.DONE, again.reason
    assert model.calls == asked + 1
    calls = {j.index: j.decider_calls for j in again.journey if j.decider_calls}
    assert calls == {6: 1}
    assert again.journey[0].source == "memory"


def test_a_stale_ref_on_a_plain_press_is_looked_at_again() -> None:
    """The press of Settings comes back stale (the screen shifted): the step takes a fresh
    look and presses again; the stale row is kept, the journey passes."""
    probe = journey(make_sim_device("sim:settings-ios"), JOURNEY[:2])
    press = probe.steps[-1]
    assert press.action is not None
    # the sign-in's commands, then the plain press's snapshot: the press is the next command
    commands = sum(2 if r.action else 1 for r in probe.steps)
    dev = make_sim_device("sim:settings-ios", faults=Faults(stale_on=frozenset({commands})))
    result = journey(dev, JOURNEY)
    assert result.status is RunStatus.DONE, result.reason
    rows = [r for r in result.steps if r.journey_step == 2]
    assert [r.outcome.value for r in rows] == ["stale", "acted"]


def test_a_plain_fill_types_a_secret_into_secure_fields_only() -> None:
    """`fill: {field: Email, input: password}` would show the secret on screen: the step is
    refused before anything is typed, as the loop refuses it."""
    dev = make_sim_device("sim:settings-ios")
    result = journey(dev, [{"fill": {"field": "Email", "input": "password"}}])
    assert result.status is RunStatus.BLOCKED
    assert "secret input 'password' for 'Email', which is not a secure field" in result.reason
    assert dev.values == {}
    assert PASSWORD not in result.model_dump_json()


def test_a_device_that_goes_away_mid_journey_errs_against_the_device() -> None:
    """The device disconnects during a plain step: the run ends errored naming the step, the
    error typed and counted against the device."""
    probe = journey(make_sim_device("sim:settings-ios"), JOURNEY[:1])
    commands = sum(2 if r.action else 1 for r in probe.steps)
    dev = make_sim_device("sim:settings-ios", faults=Faults(disconnect_after=commands + 1))
    result = journey(dev, JOURNEY)
    assert result.status is RunStatus.ERRORED
    assert result.reason.startswith("step 2 (2. press Settings) did not pass: device failed")
    assert result.error is not None
    assert (result.error.type, result.error.device_fault) == ("DeviceNotFoundError", True)


def test_a_check_the_first_decider_cannot_support_goes_up_the_chain() -> None:
    """The run's decider says yes but cites nothing: the check asks the next decider of the
    chain, which cites the screen; it holds, both attempts in the row, the first marked why it
    went up."""
    first = _answer("yes, it does")
    second = _answer("this field", cite="Email")
    result = journey(
        make_sim_device("sim:settings-ios"),
        [{"check": "the sign-in form asks for an email"}],
        first,
        escalate_to=(Tier("openai/bigger", second),),
    )
    assert result.status is RunStatus.DONE, result.reason
    (row,) = result.steps
    assert [a.decider for a in row.attempts] == ["decider", "openai/bigger"]
    assert row.attempts[0].escalated == "the decider said it holds but cited nothing on the screen"
    assert row.attempts[1].escalated == ""
    sure_no = journey(
        make_sim_device("sim:settings-ios"),
        [{"check": "the sign-in form asks for an email"}],
        _answer("no", done=False),
        escalate_to=(Tier("openai/bigger", second),),
    )
    assert sure_no.status is RunStatus.BLOCKED  # a sure no is an answer: not asked again
    assert len(second.seen) == 1


class _Metered:
    """A decider at our seam that answers as the rules do and reports 1,000 input tokens a
    call, as a model would; "Open Settings" it presses Settings, and a natural-language check
    it answers yes, citing the screen's first element."""

    def __init__(self) -> None:
        self.rules = RulesDecider()
        self.calls = 0

    def decide(self, state: DecideState) -> Decision:
        self.calls += 1
        if state.goal.startswith("Check, do not act"):
            cited = state.candidates[0].ref
            d = Decision(target=cited, done=True, confidence=0.9, reason="it shows")
        elif state.goal == "Open Settings":
            ref = next((c.ref for c in state.candidates if c.name == "Settings"), None)
            d = Decision(target=ref, confidence=0.9) if ref else Decision(done=True)
        else:
            d = self.rules.decide(state)
        return d.model_copy(update={"usage": TokenUsage(input_tokens=1000)})


def _spent(result: RunResult) -> int:
    return sum(r.decision.usage.input_tokens for r in result.steps if r.decision is not None)


def test_a_journey_s_token_budget_is_the_whole_run_s_not_each_goal_step_s() -> None:
    """The sign-in goal spends 4 calls of 1,000 tokens; a budget of 4,500 leaves no room for
    the second goal's first call: the run ends `over-budget` at step 2, 4,000 spent. Each
    goal step had the whole budget of its own, and the journey passed with 6,000 spent."""
    raw = [JOURNEY[0], {"goal": "Open Settings"}]
    decider = _Metered()
    params = RunParams(budget_tokens=4500)
    result = journey(make_sim_device("sim:settings-ios"), raw, decider, params=params)
    assert result.status is RunStatus.OVER_BUDGET, result.reason
    assert "token budget 4500" in result.reason
    assert [j.passed for j in result.journey] == [True, False]
    assert _spent(result) == decider.calls * 1000 == 4000


def test_a_check_s_model_call_is_priced_and_held_to_the_budget() -> None:
    """A natural-language check asks the decider: its call is priced like a goal step's and
    counted against the run's budget. It was neither: a check past the budget was asked
    anyway, and its tokens were missing from the run's cost."""
    raw = [JOURNEY[0], {"check": "the welcome screen is shown"}]
    prices = PriceTable(models={"openai/fake": Price(input=2.0, output=0.0)})
    decider = _Metered()
    done = journey(
        make_sim_device("sim:settings-ios"), raw, decider, decider_name="openai/fake",
        prices=prices,
    )  # fmt: skip
    assert done.status is RunStatus.DONE, done.reason
    check = [r for r in done.steps if r.journey_step == 2]
    assert check[-1].decision is not None
    assert check[-1].decision.usage.cost == pytest.approx(1000 * 2.0 / 1_000_000)
    assert done.totals.cost == pytest.approx(decider.calls * 1000 * 2.0 / 1_000_000)
    over = journey(
        make_sim_device("sim:settings-ios"), raw, _Metered(),
        params=RunParams(budget_tokens=4000),
    )  # fmt: skip
    assert over.status is RunStatus.OVER_BUDGET, over.reason
    assert [j.passed for j in over.journey] == [True, False]
    assert _spent(over) == 4000
