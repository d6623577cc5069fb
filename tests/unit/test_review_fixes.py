"""Review findings, each a test that failed before its fix: a typed value shown in a control's
name never reaches history, rows or guard reasons; a done run that took a detour teaches the
way out, and a remembered detour is invalidated instead of looping; long reasons fit."""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory
from workers.core.model import (
    ActionResult,
    Candidate,
    DecideState,
    Decision,
    Inputs,
    InputValue,
    Kind,
    Node,
    Platform,
    RunStatus,
    Snapshot,
)
from workers.core.params import RunParams
from workers.core.ports import Device
from workers.core.projection import build_snapshot
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device

EMAIL = "ada.lovelace@example.com"


@dataclass
class Screens(Device):
    """A tiny device: named screens of buttons; a press goes where its table says."""

    screens: dict[str, tuple[str, ...]]
    moves: dict[tuple[str, str], str]
    at: str = "A"
    gen: int = 1

    @property
    def platform(self) -> Platform:
        return Platform.IOS

    def snapshot(self) -> Snapshot:
        nodes = [Node(ref="e1", type="StaticText", label=f"Screen {self.at}")]
        nodes += [
            Node(ref=f"e{i}", type="Button", label=name)
            for i, name in enumerate(self.screens[self.at], 2)
        ]
        return build_snapshot(nodes, str(self.gen))

    def press(self, pinned: str) -> ActionResult:
        ref = pinned.split("~", maxsplit=1)[0].removeprefix("@")
        name = self.screens[self.at][int(ref[1:]) - 2]
        nxt = self.moves.get((self.at, name), self.at)
        changed = nxt != self.at
        self.at, self.gen = nxt, self.gen + 1
        return ActionResult(changed=changed, refs_generation=str(self.gen))

    def fill(self, pinned: str, value: InputValue) -> ActionResult:
        raise AssertionError("no fields here")

    def close(self) -> None:
        pass


@dataclass
class Script:
    """Press these names in order, then say done."""

    names: list[str]
    asked: int = 0
    seen: list[DecideState] = field(default_factory=list)

    def decide(self, state: DecideState) -> Decision:
        self.seen.append(state)
        self.asked += 1
        if not self.names:
            return Decision(done=True, decided_by="model")
        name = self.names.pop(0)
        ref = next(c.ref for c in state.candidates if c.name == name)
        return Decision(target=ref, confidence=0.9, decided_by="model")


def maze() -> Screens:
    return Screens(
        screens={"A": ("Help", "Go"), "B": ("Back",), "C": ("Finish",)},
        moves={("A", "Help"): "B", ("B", "Back"): "A", ("A", "Go"): "C"},
    )


def test_a_detour_is_not_remembered_and_a_remembered_cycle_is_invalidated() -> None:
    memory = InMemoryMemory("model")
    first = run_goal(maze(), "Get to C", decider=Script(["Help", "Back", "Go"]), memory=memory)
    assert first.status is RunStatus.DONE
    # screen A's entry is the way out (Go), not the detour (Help)
    second_decider = Script([])
    second = run_goal(maze(), "Get to C", decider=second_decider, memory=memory)
    assert second.status is RunStatus.DONE
    assert second_decider.asked == 0
    assert len(second.steps) == 2  # Go, done: no detour replayed
    # a poisoned cycle (A: Help, B: Back) is cut: the second visit to A invalidates its entry
    poisoned = InMemoryMemory("model")
    run_goal(maze(), "Get to C", decider=Script(["Help", "Back", "Go"]), memory=poisoned)
    [a_key] = [k for k, e in poisoned.entries.items() if e.target and e.target.name == "Go"]
    poisoned.entries[a_key] = poisoned.entries[a_key].model_copy(
        update={"target": poisoned.entries[a_key].target.model_copy(update={"name": "Help"})}  # type: ignore[union-attr]
    )
    third = run_goal(
        maze(), "Get to C", decider=Script(["Go"]), memory=poisoned, params=RunParams(max_steps=8)
    )
    assert third.status is RunStatus.DONE, third.reason
    assert [k for k, _ in poisoned.invalidated] == [a_key]


def test_a_typed_value_in_a_controls_name_never_reaches_history_or_rows() -> None:
    screens = Screens(
        screens={"A": (f"Continue as {EMAIL}", "Delete account"), "B": ("Done",)},
        moves={("A", f"Continue as {EMAIL}"): "B"},
    )
    decider = Script([f"Continue as {EMAIL}"])
    inputs = Inputs.of(secret={"email": EMAIL})
    result = run_goal(screens, "Sign in", decider=_Raw(decider), inputs=inputs)
    assert result.status is RunStatus.DONE
    assert EMAIL not in result.model_dump_json()
    assert all(EMAIL not in line for s in decider.seen for line in s.history)
    # a guard's reason quotes the control as shown: scrubbed too
    danger = Screens(screens={"A": (f"Delete {EMAIL}",)}, moves={})
    escalated = run_goal(
        danger, "Sign in", decider=_Raw(Script([f"Delete {EMAIL}"])), inputs=inputs
    )
    assert escalated.status is RunStatus.ESCALATED
    assert EMAIL not in escalated.model_dump_json()


@dataclass
class _Raw:
    """Maps a scrubbed candidate name back so the script can find it (a model would answer by
    ref; the script answers by the name as the screen shows it)."""

    inner: Script

    def decide(self, state: DecideState) -> Decision:
        names = [n.replace(EMAIL, "{email}") for n in self.inner.names]
        self.inner.names = names
        return self.inner.decide(state)


def test_long_reasons_fit_a_decision() -> None:
    marker = "W" * 200
    device = make_sim_device("sim:signin-ios")
    result = run_goal(device, "Sign in", decider=RulesDecider(), params=RunParams(done_when=marker))
    assert result.status in {RunStatus.BLOCKED, RunStatus.DONE, RunStatus.ESCALATED}
    tie = RulesDecider().decide(
        DecideState(
            goal="Sign in",
            step=1,
            candidates=tuple(
                Candidate(ref=f"e{i}", kind=Kind.BUTTON, name=f"Continue {'x' * 80} {i}")
                for i in range(3)
            ),
            context=(),
            input_names=(),
        )
    )
    assert len(tie.reason) <= 200
