"""Cross-cutting behaviour around a device: one chain of hooks around one device object.

Like dramatiq's middleware, a `DeviceHook` has no-op hooks and overrides what it needs: the
fence checks its lease `before` each command, telemetry times and counts each command `after`
it, the kept Linux session notes a fatal error. The hooks never call the device: the chain
(`HookedDevice`) does, for every capability of the `DevicePort`. So a layer adds behaviour and
cannot subtract a capability (three hand-forwarding wrappers each had to remember `screenshot`;
one forgot, and a fleet worker on the Linux backend kept no pictures).

`with_hooks(device, *hooks)` extends a chain rather than wrapping it: the worker's device is
always one `HookedDevice` around the backend's device, whatever layers were added.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from workers.core.model import ActionResult, Direction, InputValue, Platform, Snapshot
from workers.core.ports import Device, DeviceAction, DevicePort
from workers.core.shots import Screenshot
from workers.core.video import Recording

__all__ = ["DeviceCommand", "DeviceHook", "HookedDevice", "with_hooks"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class DeviceCommand:
    """One device command as the chain saw it: it returned `result` or raised `error`."""

    name: str
    """snapshot | press | fill | screenshot | record | close, or a device action (scroll, back,
    launch, relaunch, open, submit, wait)"""
    seconds: float
    meta: dict[str, object] = field(default_factory=dict)
    """The pinned ref, and a fill's input name and sensitivity: never a value."""
    result: Snapshot | ActionResult | None = None
    error: BaseException | None = None


class DeviceHook:
    """One layer of behaviour around a device's commands. Override what you need."""

    def before(self, command: str) -> None:
        """Before `command` is sent; raise to refuse it (it is not sent, and no `after` runs)."""

    def after(self, command: DeviceCommand) -> None:
        """After the command returned or raised (timed once, by the chain)."""


class HookedDevice(Device):
    """`device` with its `hooks` around every command, in order (`before` each in turn, the
    command, then `after` each in turn). The remembered-action hint is passed on as it is (it
    sends nothing). `close`: the device's, unless the chain was given its own (a kept session
    ends the run instead)."""

    def __init__(
        self,
        device: DevicePort,
        hooks: tuple[DeviceHook, ...] = (),
        *,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.device = device
        self.hooks = hooks
        self._close = close

    @property
    def platform(self) -> Platform:
        return self.device.platform

    def snapshot(self) -> Snapshot:
        return self._send("snapshot", self.device.snapshot, {})

    def press(self, pinned_ref: str) -> ActionResult:
        return self._send("press", lambda: self.device.press(pinned_ref), {"ref": pinned_ref})

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        meta = {"ref": pinned_ref, "input": value.name, "sensitive": value.sensitive}
        return self._send("fill", lambda: self.device.fill(pinned_ref, value), meta)

    def screenshot(self) -> Screenshot:
        return self._send("screenshot", self.device.screenshot, {})

    def record(self) -> Recording:
        return self._send("record", self.device.record, {})

    def expect_known_screen(self) -> bool:
        return self.device.expect_known_screen()

    def actions(self) -> frozenset[DeviceAction]:
        return self.device.actions()

    def action_refusal(self, action: DeviceAction) -> str:
        return self.device.action_refusal(action)

    def scroll(self, direction: Direction) -> ActionResult:
        return self._send("scroll", lambda: self.device.scroll(direction), {"to": direction})

    def back(self) -> ActionResult:
        return self._send("back", self.device.back, {})

    def launch(self, *, relaunch: bool = False) -> ActionResult:
        name = "relaunch" if relaunch else "launch"
        return self._send(name, lambda: self.device.launch(relaunch=relaunch), {})

    def open_link(self, target: str) -> ActionResult:
        return self._send("open", lambda: self.device.open_link(target), {})

    def submit(self) -> ActionResult:
        return self._send("submit", self.device.submit, {})

    def wait(self, text: str, timeout_s: float) -> bool:
        return self._send("wait", lambda: self.device.wait(text, timeout_s), {})

    def close(self) -> None:
        self._send("close", self._close or self.device.close, {})

    def _send(self, name: str, call: Callable[[], _T], meta: dict[str, object]) -> _T:
        for hook in self.hooks:
            hook.before(name)
        t0 = time.perf_counter()
        try:
            result = call()
        except BaseException as exc:
            self._after(DeviceCommand(name, time.perf_counter() - t0, meta, error=exc))
            raise
        seconds = time.perf_counter() - t0
        shown = result if isinstance(result, Snapshot | ActionResult) else None
        self._after(DeviceCommand(name, seconds, meta, result=shown))
        return result

    def _after(self, command: DeviceCommand) -> None:
        for hook in self.hooks:
            hook.after(command)


def with_hooks(
    device: DevicePort, *hooks: DeviceHook, close: Callable[[], None] | None = None
) -> HookedDevice:
    """`device` with `hooks` added after the ones it has: a `HookedDevice` is extended, never
    wrapped, so the chain stays one object around the backend's device. `close` replaces the
    device's own (kept when not given)."""
    if isinstance(device, HookedDevice):
        return HookedDevice(device.device, (*device.hooks, *hooks), close=close or device._close)  # noqa: SLF001 - same class
    return HookedDevice(device, hooks, close=close)
