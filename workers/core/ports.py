"""The two seams the loop talks through: the device and the decider.

`DevicePort` is implemented by `workers.devices.sim.SimDevice` (in-process, scripted apps)
and `workers.devices.agent_device.AgentDeviceDevice` (the agent-device daemon).
`Decider` is implemented by `workers.decide.rules.RulesDecider`,
`workers.decide.scripted.ScriptedDecider` and `workers.decide.instructor.InstructorDecider`.
"""

from __future__ import annotations

import functools
from typing import Protocol, runtime_checkable

from workers.core.app import AppRequest, AppUnderTest, ResetPolicy
from workers.core.model import ActionResult, DecideState, Decision, InputValue, Platform, Snapshot


@runtime_checkable
class DevicePort(Protocol):
    """One device: snapshot it, and press or fill a ref pinned to a snapshot's generation.

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

    def close(self) -> None: ...


@runtime_checkable
class KnownScreen(Protocol):
    """A device that can check a remembered action's effect faster than a settle window.

    The loop calls `expect_known_screen()` right before a press or fill it repeats from its
    decision memory (made on this very screen in a `done` run); the device may then read the
    action's effect from the snapshots that follow instead of waiting its settle window out.
    The effect is still checked: an action that changes nothing reports `changed=False`."""

    def expect_known_screen(self) -> None: ...


@functools.cache
def _knows_screens(cls: type) -> bool:
    return issubclass(cls, KnownScreen)


def expect_known_screen(device: DevicePort) -> None:
    """Call `device.expect_known_screen()` if it is a `KnownScreen`; nothing otherwise.

    Decided once per device class: a runtime Protocol's `isinstance` walks the protocol's
    members every time (~3 µs on 3.11), and a remembered step asks through every wrapper."""
    if _knows_screens(type(device)):
        device.expect_known_screen()  # type: ignore[attr-defined]


class DeviceHost(Protocol):
    """A worker's device across its runs: what it keeps between them (an agent-device daemon,
    the app it started), the app each run drives, reset as the run asks, and a device per run.

    Implemented by `workers.devices.sim_host.SimHost` and
    `workers.devices.agent_device_host.AgentDeviceHost`."""

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
