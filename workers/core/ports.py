"""The two seams the loop talks through: the device and the decider.

`DevicePort` is implemented by `workers.devices.sim.SimDevice` (in-process, scripted apps)
and `workers.devices.agent_device.AgentDeviceDevice` (the agent-device daemon), both `Device`s;
cross-cutting behaviour (fencing, telemetry, a kept session) hangs on one chain of hooks around
the one device (`workers.core.device_hooks`).
`Decider` is implemented by `workers.decide.rules.RulesDecider`,
`workers.decide.scripted.ScriptedDecider` and `workers.decide.instructor.InstructorDecider`.
"""

from __future__ import annotations

import abc
import time
from typing import Literal, Protocol, runtime_checkable

from workers.core.app import AppRequest, AppUnderTest, ResetPolicy
from workers.core.errors import ConfigError
from workers.core.model import (
    ActionResult,
    DecideState,
    Decision,
    Direction,
    InputValue,
    Platform,
    Snapshot,
)
from workers.core.shots import NoScreenshotsError, Screenshot
from workers.core.video import NoVideoError, Recording

DeviceAction = Literal["scroll", "back", "launch", "relaunch", "open", "submit", "wait"]
"""The device actions a journey's plain steps use beyond snapshot, press and fill
(`workers.core.journey`); `DevicePort.actions` says which of them a device can do."""
DEVICE_ACTIONS: tuple[DeviceAction, ...] = (
    "scroll",
    "back",
    "launch",
    "relaunch",
    "open",
    "submit",
    "wait",
)
WAIT_POLL_S = 0.25
"""How often `Device.wait`'s default looks at the screen again."""


class UnsupportedActionError(ConfigError, code="UNSUPPORTED_ACTION"):
    """This device cannot do a device action; a journey that needs one is refused before its
    first step (`workers.core.journey.refusal`), never halfway."""

    def __init__(self, action: str, why: str) -> None:
        super().__init__(f"this device cannot {action}: {why}")
        self.action = action


@runtime_checkable
class DevicePort(Protocol):
    """One device: snapshot it, press or fill a ref pinned to a snapshot's generation, take a
    picture of its screen, and take the remembered-action hint. Every capability a loop may use
    is here; a device that lacks one says so (`Device`'s defaults), never passes silently.

    Errors are raised as the `workers.core.errors.DeviceError` tree, never as foreign exceptions.
    """

    @property
    def platform(self) -> Platform: ...

    def snapshot(self) -> Snapshot:
        """An interactive snapshot. An empty tree is an `EmptySnapshotError`, not a screen."""
        ...

    def press(self, pinned_ref: str) -> ActionResult:
        """Press `@eN~sGEN` and settle; report the settle diff."""
        ...

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        """Type `value` into `@eN~sGEN` and settle.

        A sensitive value goes through the device's variables channel (agent-device:
        `recordAs` + `AD_VAR_<NAME>`) and is never echoed, logged or raised.
        """
        ...

    def screenshot(self) -> Screenshot:
        """A picture of the screen the last snapshot described (`workers.core.shots`);
        `ScreenshotUnavailableError` when this device cannot take one (now or ever)."""
        ...

    def record(self) -> Recording:
        """Start recording the app's screen for one run (`workers.core.video`);
        `VideoUnavailableError` when this device cannot (now or ever)."""
        ...

    def expect_known_screen(self) -> bool:
        """The remembered-action hint: the next press or fill repeats one the loop's decision
        memory made on this very screen in a `done` run, so the device may read the action's
        effect from the snapshots that follow instead of waiting its settle window out (the
        result says so: `ActionResult.settle_skipped`). The effect is still checked: an action
        that changes nothing reports `changed=False`. False: this device cannot, and settles
        the action as any other."""
        ...

    def actions(self) -> frozenset[DeviceAction]:
        """The device actions below this device can do; a journey needing another is refused
        before it starts, with `action_refusal`'s reason."""
        ...

    def action_refusal(self, action: DeviceAction) -> str:
        """Why this device cannot do `action` ("" when it can)."""
        ...

    def scroll(self, direction: Direction) -> ActionResult:
        """Scroll the screen's content one page in `direction` and settle."""
        ...

    def back(self) -> ActionResult:
        """Go back one screen (the app's back stack, or the system's back) and settle."""
        ...

    def launch(self, *, relaunch: bool = False) -> ActionResult:
        """Bring the device's app to the front (`relaunch`: terminate it first) and settle."""
        ...

    def open_link(self, target: str) -> ActionResult:
        """Open a deep link or URL in the device's app and settle."""
        ...

    def submit(self) -> ActionResult:
        """Press the keyboard's enter/go on the focused field and settle."""
        ...

    def wait(self, text: str, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for `text` to be visible; whether it became visible."""
        ...

    def close(self) -> None: ...


class Device(abc.ABC):
    """The base of every device: the core commands to implement, and an honest default for
    each optional capability ("this device cannot"), so no device or layer lacks one."""

    @property
    @abc.abstractmethod
    def platform(self) -> Platform: ...

    @abc.abstractmethod
    def snapshot(self) -> Snapshot: ...

    @abc.abstractmethod
    def press(self, pinned_ref: str) -> ActionResult: ...

    @abc.abstractmethod
    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult: ...

    def screenshot(self) -> Screenshot:
        raise NoScreenshotsError

    def record(self) -> Recording:
        raise NoVideoError

    def expect_known_screen(self) -> bool:
        return False

    def actions(self) -> frozenset[DeviceAction]:
        return frozenset({"wait"})  # `wait` below needs only snapshots

    def action_refusal(self, action: DeviceAction) -> str:
        if action in self.actions():
            return ""
        return f"this device cannot {action}: {type(self).__name__} has no {action} command"

    def scroll(self, direction: Direction) -> ActionResult:  # noqa: ARG002 - it cannot
        raise self._cannot("scroll")

    def back(self) -> ActionResult:
        raise self._cannot("back")

    def launch(self, *, relaunch: bool = False) -> ActionResult:
        raise self._cannot("relaunch" if relaunch else "launch")

    def open_link(self, target: str) -> ActionResult:  # noqa: ARG002 - it cannot
        raise self._cannot("open")

    def submit(self) -> ActionResult:
        raise self._cannot("submit")

    def wait(self, text: str, timeout_s: float) -> bool:
        """Look at the screen until `text` is visible (the one visibility predicate,
        `Snapshot.shows`) or `timeout_s` passed."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.snapshot().shows(text):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(WAIT_POLL_S)

    def close(self) -> None:
        return None

    def _cannot(self, action: DeviceAction) -> UnsupportedActionError:
        why = self.action_refusal(action) or f"{type(self).__name__} has no {action} command"
        return UnsupportedActionError(action, why.removeprefix(f"this device cannot {action}: "))


class DeviceHost(Protocol):
    """A worker's device across its runs: what it keeps between them (an agent-device daemon,
    the app it started), the app each run drives, reset as the run asks, and a device per run.

    Implemented by `workers.devices.sim.host.SimHost` and
    `workers.devices.agent_device.host.AgentDeviceHost`."""

    def prepare(self, asked: AppRequest | None, reset: ResetPolicy | None) -> AppUnderTest | None:
        """The app the next `open` drives and the reset it gets (`ConfigError` when this device
        cannot serve what the run asks for); None: no app to speak of."""
        ...

    def open(self, run_id: str) -> DevicePort:
        """Reset the prepared app, then open the device for one run (the caller closes it)."""
        ...

    def close(self) -> None:
        """Stop what the host keeps (at the end of the worker's process)."""
        ...


class Decider(Protocol):
    """Answer one narrow question: which ref on this screen advances the goal."""

    def decide(self, state: DecideState) -> Decision: ...
