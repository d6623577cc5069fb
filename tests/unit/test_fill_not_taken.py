"""A fill the screen does not show (issue 42, "never a submit with a supplied input untyped"):
a toolkit whose controls agent-device clicks beside (Qt 5: tests/agent_device/
test_third_party_e2e.py) types nothing, and the settle diff says the screen did not change.
The loop must not count that input as typed and press the submit control over the empty
field: it ends `blocked` saying the field did not take it, before any press."""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.core.inputs import Inputs, InputValue
from workers.core.loop import run_goal
from workers.core.model import ActionKind, ActionResult, Platform, RunStatus, Snapshot
from workers.core.ports import Device
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import SimDevice, make_sim_device


@dataclass
class DeafFields(Device):
    """The sim's sign-in app whose text fields ignore typing (a press still lands)."""

    inner: SimDevice = field(default_factory=lambda: make_sim_device("sim:signin-ios"))
    fills: int = 0

    @property
    def platform(self) -> Platform:
        return Platform.IOS

    def snapshot(self) -> Snapshot:
        return self.inner.snapshot()

    def press(self, pinned: str) -> ActionResult:
        return self.inner.press(pinned)

    def fill(self, pinned: str, value: InputValue) -> ActionResult:
        self.fills += 1
        return ActionResult(changed=False)

    def close(self) -> None:
        self.inner.close()


def test_a_fill_that_changed_nothing_ends_blocked_before_any_press() -> None:
    device = DeafFields()
    inputs = Inputs.of({"email": "ada@example.com"}, {"password": "hunter2!"})
    result = run_goal(device, "Sign in", decider=RulesDecider(), inputs=inputs)
    assert result.status is RunStatus.BLOCKED
    assert result.reason.startswith("typing email into 'Email' changed nothing: the field did ")
    assert device.fills == 1
    acts = [row.action.kind for row in result.steps if row.action is not None]
    assert acts == [ActionKind.FILL]


def test_fills_the_screen_shows_go_on_to_sign_in() -> None:
    """The same app with working fields signs in (the check is not a blanket refusal)."""
    device = make_sim_device("sim:signin-ios")
    inputs = Inputs.of({"email": "ada@example.com"}, {"password": "hunter2!"})
    result = run_goal(device, "Sign in", decider=RulesDecider(), inputs=inputs)
    assert result.status is RunStatus.DONE, result.reason
    fills = [row.action.input for row in result.steps if row.action is not None]
    assert {"email", "password"} <= set(fills)
