"""The loop can scroll and go back (issue 43): the device's moves are offered beside the
screen's elements, one choice per step, settled, counted by the unproductive limit, kept by
the decision memory, and never offered by a device that cannot make them."""

from __future__ import annotations

import pytest

from scheduler.cli._render import step_cells
from scheduler.service.requests import SuiteSubmit
from scheduler.suites.flows import FlowsFileError, parse
from scheduler.suites.junit import step_line
from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory, memory_key
from workers.core.model import ActionKind, DecideState, Decision, Inputs, Kind, Outcome, RunStatus
from workers.core.moves import offered
from workers.core.params import RunParams
from workers.decide.rules import RulesDecider
from workers.decide.scripted import ScriptedDecider, fill, press
from workers.devices.sim.device import make_sim_device

INPUTS = Inputs.of({"email": "ada@example.com"}, {"password": "correct horse"})
MOVES = {"scroll down", "scroll up", "go back"}


def _kinds(result) -> list[str]:
    return [r.action.kind.value if r.action else "-" for r in result.steps]


def test_the_rules_scroll_down_to_a_sign_in_button_below_the_fold() -> None:
    device = make_sim_device("sim:fold-ios")
    result = run_goal(device, "Sign in", decider=RulesDecider(), inputs=INPUTS)
    assert result.status is RunStatus.DONE, result.reason
    assert _kinds(result) == ["fill", "press", "fill", "scroll", "scroll", "press", "-"]
    seen = result.steps[3].seen
    assert seen is not None
    assert {c.name for c in seen.candidates if c.kind is Kind.MOVE} == MOVES


def test_without_moves_the_same_screen_ends_blocked() -> None:
    """The control: the button is really below the fold."""
    device = make_sim_device("sim:fold-ios")
    params = RunParams(moves=False)
    result = run_goal(device, "Sign in", decider=RulesDecider(), inputs=INPUTS, params=params)
    assert result.status is RunStatus.BLOCKED
    assert "scroll" not in _kinds(result)


def test_a_move_that_changed_nothing_counts_and_is_not_offered_again_there() -> None:
    """Scrolling a screen that fits changes nothing: an unproductive step, and the next
    question on that screen no longer offers it."""
    device = make_sim_device("sim:signin-ios")
    decider = ScriptedDecider([press("scroll down"), press("Continue")], then=Decision(done=True))
    result = run_goal(
        device, "Sign in", decider=decider, inputs=INPUTS, params=RunParams(max_steps=2)
    )
    assert [r.outcome for r in result.steps][:1] == [Outcome.UNPRODUCTIVE]
    second = {c.name for c in decider.seen[1].candidates if c.kind is Kind.MOVE}
    assert second == MOVES - {"scroll down"}


def test_a_model_scrolls_a_list_and_goes_back_and_memory_repeats_it() -> None:
    """Settings, a list longer than the screen: the decider scrolls until "Appearance" shows,
    opens it, toggles, goes back; a second run on another device repeats every choice from
    memory (no decider call), moves included."""
    script = [
        fill("Email", "email"), press("Continue"), fill("Password", "password"),
        press("Sign in"), press("Settings"),
    ]  # fmt: skip

    def until_appearance(state):
        names = {c.name for c in state.candidates}
        return press("Appearance" if "Appearance" in names else "scroll down")(state)

    memory = InMemoryMemory(decider="scripted")
    params = RunParams(done_when="Dark mode", max_steps=20)
    first = ScriptedDecider(script, then=until_appearance)
    done = run_goal(
        make_sim_device("sim:settings-ios"), "Open Appearance", decider=first, inputs=INPUTS,
        params=params, memory=memory,
    )  # fmt: skip
    assert done.status is RunStatus.DONE, done.reason
    assert _kinds(done).count("scroll") >= 2
    assert memory.entries, "the run remembered its choices"
    again = ScriptedDecider([], then=Decision(blocked=True, reason="asked"))
    repeat = run_goal(
        make_sim_device("sim:settings-ios"), "Open Appearance", decider=again,
        inputs=INPUTS, params=params, memory=memory,
    )  # fmt: skip
    assert repeat.status is RunStatus.DONE, repeat.reason
    assert again.seen == []  # every step from memory
    assert _kinds(repeat) == _kinds(done)


def test_go_back_returns_to_the_screen_before() -> None:
    device = make_sim_device("sim:signin-ios")
    decider = ScriptedDecider(
        [fill("Email", "email"), press("Continue"), press("go back")],
        then=lambda s: Decision(done=True) if any(c.name == "Email" for c in s.candidates)
        else Decision(blocked=True, reason="not back"),
    )  # fmt: skip
    result = run_goal(device, "Sign in", decider=decider, inputs=INPUTS)
    assert result.steps[2].action is not None
    assert result.steps[2].action.kind is ActionKind.BACK
    assert result.steps[2].outcome is Outcome.ACTED
    assert decider.seen[3].screen == decider.seen[0].screen


def test_a_device_that_cannot_scroll_offers_no_move() -> None:
    assert offered(frozenset()) == ()
    assert [c.name for c in offered(frozenset({"back"}))] == ["go back"]


def test_the_moves_leave_a_screen_s_memory_key_alone() -> None:
    """A screen remembered on a device without moves is the same entry on one with them."""
    device = make_sim_device("sim:signin-ios")
    decider = ScriptedDecider([Decision(blocked=True, reason="look")])
    run_goal(device, "Sign in", decider=decider, inputs=INPUTS)
    state = decider.seen[0]
    bare = state.model_copy(
        update={"candidates": tuple(c for c in state.candidates if c.kind is not Kind.MOVE)}
    )
    assert len(bare.candidates) < len(state.candidates)
    assert memory_key(state, "rules") == memory_key(bare, "rules")


def test_the_rules_block_a_screen_with_no_control_rather_than_scroll_it() -> None:
    """Nothing usable on screen (a toolkit that reports every control disabled): blocked at
    once, with the counts (issue 42), not a scroll; after a scroll down that moved the screen
    into a stretch of text, the rules go on scrolling."""
    moves = offered(frozenset({"scroll", "back"}))
    bare = DecideState(goal="Sign in", step=1, candidates=moves, context=(), input_names=("email",))
    assert RulesDecider().decide(bare).blocked
    after = bare.model_copy(update={"step": 5, "history": ("4: scroll down; screen changed",)})
    assert RulesDecider().decide(after).target == "m1"


def test_a_flows_file_turns_the_moves_off_and_a_bad_value_names_its_line() -> None:
    flows = parse("suite: s\nflows:\n  - name: a\n    goal: Sign in\n    params: {moves: false}\n")
    assert SuiteSubmit.model_validate(flows.body).flows[0].moves is False
    with pytest.raises(FlowsFileError, match=r"line 5: flows\[0\]\.params\.moves"):
        parse("suite: s\nflows:\n  - name: a\n    goal: Sign in\n    params: {moves: maybe}\n")


def test_a_move_s_row_says_which_way_in_every_reader() -> None:
    """A scroll's row says up or down where each reader shows the step (the CLI's table,
    the JUnit and HTML reports, the MCP report, the history's decision, the log line); it said
    "scroll" alone, so a run that scrolled down then up read the same as one that scrolled
    down twice."""
    script = [press("scroll down"), press("scroll up"), press("go back")]
    decider = ScriptedDecider(script, then=Decision(done=True))
    result = run_goal(make_sim_device("sim:fold-ios"), "Sign in", decider=decider, inputs=INPUTS)
    rows = result.steps[:3]
    assert [r.action.label if r.action else "" for r in rows] == [
        "scroll down", "scroll up", "back",
    ]  # fmt: skip
    assert [r.action.direction if r.action else None for r in rows] == ["down", "up", None]
    assert "scroll up" in step_line(rows[1])
    assert "scroll up" in str(step_cells(rows[1])[3])
