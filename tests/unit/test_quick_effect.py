"""A remembered action's effect, checked by re-snapshots instead of a settle window
(`agent_device.quick`), and the loop's hint that an action is a remembered one."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory
from workers.core.model import ActionResult, Inputs, InputValue, Node, Platform, RunStatus, Snapshot
from workers.core.ports import Device
from workers.core.projection import build_snapshot
from workers.decide.rules import RulesDecider
from workers.devices.agent_device.quick import quick_effect, screen_look
from workers.devices.sim.device import make_sim_device


def screen(*labels: str, gen: int) -> Snapshot:
    return build_snapshot(
        [Node(ref=f"e{i}", type="Button", label=x) for i, x in enumerate(labels)], str(gen)
    )


class Screens:
    """A device's snapshots in order, and a clock that advances 70 ms a capture."""

    def __init__(self, screens: Iterable[Snapshot]) -> None:
        self._screens = iter(screens)
        self.taken = 0
        self.now = 0.0

    def snapshot(self) -> Snapshot:
        self.taken += 1
        self.now += 0.07
        return next(self._screens)

    def clock(self) -> float:
        return self.now


def look(snap: Snapshot | None) -> object:
    return None if snap is None else tuple(n.label for n in snap.nodes)


def test_a_change_that_holds_still_ends_the_check_at_once():
    """Changed on the first capture, the same on the second: two snapshots, and the second
    is the one handed on (the next step's)."""
    before = screen("Sign in", gen=1)
    s = Screens([screen("Welcome", gen=2), screen("Welcome", gen=3)])
    result, last = quick_effect(s.snapshot, before, look=look, clock=s.clock)
    assert result == ActionResult(
        changed=True, settled=True, settle_skipped=True, refs_generation="3"
    )
    assert last.refs_generation == "3"
    assert s.taken == 2


def test_a_screen_still_moving_is_followed_until_it_holds_still():
    """A transition (A → B → C → C): the check waits for two equal captures."""
    before = screen("A", gen=1)
    s = Screens([screen("B", gen=2), screen("C", gen=3), screen("C", gen=4)])
    result, last = quick_effect(s.snapshot, before, look=look, clock=s.clock)
    assert result.changed
    assert result.settled
    assert last.refs_generation == "4"
    assert s.taken == 3


def test_an_action_that_changes_nothing_is_reported_unchanged_after_the_window():
    """No change within the window: `changed=False`, as a settle diff would say, so the loop
    invalidates the remembered entry (the effect check replay skips)."""
    before = screen("Sign in", gen=1)
    s = Screens(screen("Sign in", gen=g) for g in itertools.count(2))
    result, _ = quick_effect(s.snapshot, before, look=look, clock=s.clock, window_s=1.0)
    assert result.changed is False
    assert s.now >= 1.0


def test_typing_into_a_secure_field_is_a_change_though_its_value_is_never_read():
    """A password field's value is dropped when read; the look counts what it holds."""
    field = Node(ref="e1", type="TextField", role="password text", label="Password", secure=True)
    empty = screen_look([(field, {"value": ""})])
    typed = screen_look([(field, {"value": "●●●●●●"})])
    assert empty != typed
    assert "●" not in repr(typed)


class Hinted(Device):
    """A sim device that counts the loop's remembered-action hints (and takes them)."""

    def __init__(self) -> None:
        self.inner = make_sim_device("sim:signin-ios")
        self.hints = 0
        self.hinted_actions: list[str] = []
        self._hinted = False

    @property
    def platform(self) -> Platform:
        return self.inner.platform

    def expect_known_screen(self) -> bool:
        self.hints += 1
        self._hinted = True
        return True

    def snapshot(self) -> Snapshot:
        return self.inner.snapshot()

    def press(self, pinned_ref: str) -> ActionResult:
        self._note("press")
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self._note("fill")
        return self.inner.fill(pinned_ref, value)

    def close(self) -> None:
        self.inner.close()

    def _note(self, what: str) -> None:
        if self._hinted:
            self.hinted_actions.append(what)
        self._hinted = False


def test_the_loop_hints_only_the_actions_it_takes_from_memory():
    """A decided run gets no hint; the same run from memory hints each action, right before
    it (a hint is never left over for a decided action)."""
    memory = InMemoryMemory(decider="rules")
    inputs = Inputs.of(plain={"email": "ada@example.com"}, secret={"password": "pw-1"})
    first, second = Hinted(), Hinted()
    decided = run_goal(first, "Sign in", decider=RulesDecider(), inputs=inputs, memory=memory)
    assert decided.status is RunStatus.DONE
    assert first.hints == 0
    again = run_goal(second, "Sign in", decider=RulesDecider(), inputs=inputs, memory=memory)
    assert again.status is RunStatus.DONE
    acted = [r for r in again.steps if r.action is not None]
    assert all(r.memory is not None and r.memory.outcome == "hit" for r in acted)
    assert second.hints == len(acted) == len(second.hinted_actions)
