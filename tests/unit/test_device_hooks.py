"""One chain of hooks around one device: every capability of the `DevicePort` reaches the
device through any layers, a layer adds behaviour around each command, and a device without a
capability says so (`Device`'s defaults)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from workers.core.device_hooks import DeviceCommand, DeviceHook, HookedDevice, with_hooks
from workers.core.errors import StaleRefError
from workers.core.model import ActionResult, Direction, InputValue, Platform, Snapshot
from workers.core.ports import DEVICE_ACTIONS, Device, DeviceAction, DevicePort
from workers.core.shots import NoScreenshotsError, Screenshot
from workers.core.video import Clip, NoVideoError, Recording
from workers.devices.sim.device import make_sim_device

PICTURE = Screenshot(png=b"\x89PNG-fake", width=1, height=1)


class _Recording:
    origin = (0, 0)

    def stop(self) -> Clip:
        raise NotImplementedError

    def discard(self) -> None:
        return None


RECORDING: Recording = _Recording()


class Told(Device):
    """A device that answers every capability and records which were asked of it."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.sim = make_sim_device("sim:signin-ios")

    @property
    def platform(self) -> Platform:
        return Platform.ANDROID

    def snapshot(self) -> Snapshot:
        self.asked.append("snapshot")
        return self.sim.snapshot()

    def press(self, pinned_ref: str) -> ActionResult:
        self.asked.append("press")
        return self.sim.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self.asked.append("fill")
        return self.sim.fill(pinned_ref, value)

    def screenshot(self) -> Screenshot:
        self.asked.append("screenshot")
        return PICTURE

    def record(self) -> Recording:
        self.asked.append("record")
        return RECORDING

    def expect_known_screen(self) -> bool:
        self.asked.append("expect_known_screen")
        return True

    def actions(self) -> frozenset[DeviceAction]:
        self.asked.append("actions")
        return frozenset(DEVICE_ACTIONS)

    def action_refusal(self, action: DeviceAction) -> str:
        self.asked.append("action_refusal")
        return ""

    def scroll(self, direction: Direction) -> ActionResult:
        self.asked.append(f"scroll {direction}")
        return ActionResult(changed=True)

    def back(self) -> ActionResult:
        self.asked.append("back")
        return ActionResult(changed=True)

    def launch(self, *, relaunch: bool = False) -> ActionResult:
        self.asked.append(f"launch relaunch={relaunch}")
        return ActionResult(changed=relaunch)

    def open_link(self, target: str) -> ActionResult:
        self.asked.append(f"open {target}")
        return ActionResult(changed=True)

    def submit(self) -> ActionResult:
        self.asked.append("submit")
        return ActionResult(changed=True)

    def wait(self, text: str, timeout_s: float) -> bool:
        self.asked.append(f"wait {text} {timeout_s}")
        return True

    def close(self) -> None:
        self.asked.append("close")


class Seen(DeviceHook):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def before(self, command: str) -> None:
        self.log.append(f"{self.name}>{command}")

    def after(self, command: DeviceCommand) -> None:
        self.log.append(f"{self.name}<{command.name}")


class Refuse(DeviceHook):
    def before(self, command: str) -> None:
        raise PermissionError(command)


def port_members() -> list[str]:
    return sorted(n for n in vars(DevicePort) if not n.startswith("_"))


def test_every_capability_of_the_port_reaches_the_device_through_every_layer():
    """Three layers (as the worker adds: kept session, telemetry, fence): each of the port's
    capabilities arrives at the device and its answer comes back."""
    assert port_members() == [
        "action_refusal",
        "actions",
        "back",
        "close",
        "expect_known_screen",
        "fill",
        "launch",
        "open_link",
        "platform",
        "press",
        "record",
        "screenshot",
        "scroll",
        "snapshot",
        "submit",
        "wait",
    ]
    told = Told()
    log: list[str] = []
    dev = with_hooks(with_hooks(with_hooks(told, Seen("a", log)), Seen("b", log)), Seen("c", log))
    assert dev.platform is Platform.ANDROID
    snap = dev.snapshot()
    field = next(c for c in snap.candidates if c.kind.fillable)
    assert dev.expect_known_screen() is True
    dev.fill(snap.pin(field.ref), InputValue(name="email", value=SecretStr("ada@example.com")))
    snap = dev.snapshot()
    dev.press(snap.pin(next(c for c in snap.candidates if c.name == "Continue").ref))
    assert dev.screenshot() is PICTURE
    assert dev.record() is RECORDING
    assert dev.actions() == frozenset(DEVICE_ACTIONS)
    assert dev.action_refusal("scroll") == ""
    assert dev.scroll("up").changed
    assert dev.back().changed
    assert not dev.launch().changed
    assert dev.launch(relaunch=True).changed
    assert dev.open_link("acme://x").changed
    assert dev.submit().changed
    assert dev.wait("Welcome", 1.5) is True
    dev.close()
    assert told.asked == [
        "snapshot",
        "expect_known_screen",
        "fill",
        "snapshot",
        "press",
        "screenshot",
        "record",
        "actions",
        "action_refusal",
        "scroll up",
        "back",
        "launch relaunch=False",
        "launch relaunch=True",
        "open acme://x",
        "submit",
        "wait Welcome 1.5",
        "close",
    ]
    assert log.count("a>scroll") == log.count("c<open") == log.count("b<record") == 1


def test_layers_are_one_chain_around_one_device_in_order():
    """`with_hooks` extends the chain (never wraps it): one device, hooks in the order added,
    each `before` in turn, the command, each `after` in turn."""
    told, log = Told(), []
    dev = with_hooks(with_hooks(told, Seen("a", log)), Seen("b", log))
    assert dev.device is told
    assert not isinstance(dev.device, HookedDevice)
    dev.screenshot()
    assert log == ["a>screenshot", "b>screenshot", "a<screenshot", "b<screenshot"]


def test_a_hook_that_refuses_stops_the_command_before_the_device():
    """A `before` that raises (the fence, a lease lost) keeps the command from the device."""
    told = Told()
    dev = with_hooks(told, Refuse())
    with pytest.raises(PermissionError, match="press"):
        dev.press("@e1~s1")
    assert told.asked == []


def test_a_hook_sees_a_failed_command_and_it_still_raises():
    """`after` is handed the error; the caller gets it unchanged."""
    seen: list[DeviceCommand] = []

    class Keep(DeviceHook):
        def after(self, command: DeviceCommand) -> None:
            seen.append(command)

    dev = with_hooks(make_sim_device("sim:signin-ios"), Keep())
    with pytest.raises(StaleRefError) as err:
        dev.press("@e99~s1")
    assert [(c.name, c.error) for c in seen] == [("press", err.value)]


def test_a_chain_may_end_a_run_instead_of_closing_the_device():
    """A kept session's chain: `close` ends the run (the given callable), never the device;
    extending the chain keeps that."""
    told, ended = Told(), []
    dev = with_hooks(with_hooks(told, close=lambda: ended.append("run")), DeviceHook())
    dev.close()
    assert ended == ["run"]
    assert "close" not in told.asked


def test_a_device_without_a_capability_says_so_through_the_chain():
    """`Device`'s defaults: no pictures is a `NoScreenshotsError` naming it, no video a
    `NoVideoError`, and the hint is declined (False: the action settles); a chain passes them
    on as they are."""

    class Plain(Device):
        platform = Platform.IOS

        def snapshot(self) -> Snapshot:
            raise NotImplementedError

        def press(self, pinned_ref: str) -> ActionResult:
            raise NotImplementedError

        def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
            raise NotImplementedError

    dev = with_hooks(Plain(), DeviceHook())
    with pytest.raises(NoScreenshotsError, match="this device takes no screenshots"):
        dev.screenshot()
    with pytest.raises(NoVideoError, match="this device records no video"):
        dev.record()
    assert dev.expect_known_screen() is False


def test_the_sim_takes_the_hint_for_the_next_action_only():
    """A hinted press skips the settle window (and says so); the next one settles."""
    sim = make_sim_device("sim:signin-ios")
    snap = sim.snapshot()
    field = next(c for c in snap.candidates if c.kind.fillable)
    value = InputValue(name="email", value=SecretStr("ada@example.com"))
    assert sim.expect_known_screen() is True
    assert sim.fill(snap.pin(field.ref), value).settle_skipped is True
    snap = sim.snapshot()
    assert sim.fill(snap.pin(field.ref), value).settle_skipped is False
