"""Device actions on the port (issue 43, item 3): scroll, back, launch/relaunch, open, submit
and wait. A device without one says so before it is sent (`Device`'s defaults); the chain of
hooks forwards each; the sim devices do them on screens that need them; agent-device sends its
own commands, pinned here against agent-device 0.21.5's wire (`ScriptedDaemon`: no simulator,
emulator or Linux daemon is run for these)."""

from __future__ import annotations

from typing import Any

import pytest
from test_agent_device_adapter import OK_OPEN, ScriptedDaemon, fx

from workers.core.device_hooks import DeviceHook, with_hooks
from workers.core.model import ActionResult, InputValue, Platform, Snapshot
from workers.core.ports import DEVICE_ACTIONS, Device, UnsupportedActionError
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.sim.apps import SETTINGS_ROWS, SETTINGS_WINDOW
from workers.devices.sim.device import SimDevice, make_sim_device

IOS = (Platform.IOS, {"udid": "AAAA-1111"})
ANDROID = (Platform.ANDROID, {"serial": "emulator-5554"})


class Bare(Device):
    """A device with the core commands only."""

    @property
    def platform(self) -> Platform:
        return Platform.IOS

    def snapshot(self) -> Snapshot:
        return make_sim_device("sim:signin-ios").snapshot()

    def press(self, pinned_ref: str) -> ActionResult:
        return ActionResult(changed=False)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        return ActionResult(changed=False)


@pytest.mark.parametrize("action", ["scroll", "back", "launch", "relaunch", "open", "submit"])
def test_a_device_without_an_action_says_so(action: str) -> None:
    """The honest default: the action is not in `actions()`, its refusal names it, and the
    call raises `UnsupportedActionError` (never a silent no-op)."""
    dev = Bare()
    assert action not in dev.actions()
    assert (
        dev.action_refusal(action) == f"this device cannot {action}: Bare has no {action} command"
    )  # type: ignore[arg-type]
    calls = {
        "scroll": lambda: dev.scroll("down"),
        "back": dev.back,
        "launch": dev.launch,
        "relaunch": lambda: dev.launch(relaunch=True),
        "open": lambda: dev.open_link("acme://x"),
        "submit": dev.submit,
    }
    with pytest.raises(UnsupportedActionError, match=f"cannot {action}"):
        calls[action]()


def test_wait_needs_only_snapshots() -> None:
    """Every device can wait for a text: the default looks at its snapshots."""
    assert Bare().actions() == {"wait"}
    assert Bare().wait("Sign in to Acme", 0.01)
    assert not Bare().wait("Willkommen", 0.01)


class Names(DeviceHook):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def before(self, command: str) -> None:
        self.seen.append(command)


def test_the_chain_forwards_every_action() -> None:
    """A hooked device (the worker's) does each action on the device under it, and every hook
    sees it by name: no layer can drop one."""
    names = Names()
    dev = with_hooks(make_sim_device("sim:settings-ios"), names)
    assert dev.actions() == frozenset(DEVICE_ACTIONS)
    dev.scroll("down")
    dev.back()
    dev.launch()
    dev.launch(relaunch=True)
    dev.open_link("acme://settings")
    dev.submit()
    assert dev.wait("Settings", 0.01)
    assert names.seen == ["scroll", "back", "launch", "relaunch", "open", "submit", "wait"]


def _labels(dev: SimDevice) -> list[str]:
    return [label for _, _, label, _, _ in dev.shown()]


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_sim_scrolls_a_list_longer_than_the_screen(platform: str) -> None:
    """Settings shows 7 of its 20 rows; a scroll down moves a page less one row, up comes
    back, and the end of the list changes nothing."""
    dev = make_sim_device(f"sim:settings-{platform}")
    dev.screen = "settings"
    assert _labels(dev)[1:] == list(SETTINGS_ROWS[:SETTINGS_WINDOW])
    assert "Appearance" not in _labels(dev)
    assert dev.scroll("down").changed
    assert _labels(dev)[1] == SETTINGS_ROWS[SETTINGS_WINDOW - 1]
    assert dev.scroll("down").changed
    assert "Appearance" in _labels(dev)
    assert dev.scroll("down").changed  # to the last row
    assert _labels(dev)[-1] == SETTINGS_ROWS[-1]
    assert not dev.scroll("down").changed  # the list's end
    assert not dev.scroll("left").changed
    for _ in range(3):
        dev.scroll("up")
    assert _labels(dev)[1:] == list(SETTINGS_ROWS[:SETTINGS_WINDOW])


def _press(dev: SimDevice, label: str) -> ActionResult:
    snap = dev.snapshot()
    ref = next(c.ref for c in snap.candidates if c.name == label)
    return dev.press(snap.pin(ref))


def test_sim_back_stack_toggle_and_a_text_that_changes() -> None:
    """Welcome → Settings (slow: "Please wait…", the list at the next snapshot) → Appearance;
    the Dark mode switch turns the theme text; back twice is Welcome again, which now reads
    "Theme: Dark"; back with nothing behind changes nothing; back during a slow load abandons
    it."""
    dev = make_sim_device("sim:settings-android")
    dev.screen = "welcome"
    assert "Theme: Light" in _labels(dev)
    _press(dev, "Settings")
    assert _labels(dev) == ["Please wait…"]  # the list is slow to load
    assert "Account" in [c.name for c in dev.snapshot().candidates]
    for _ in range(2):
        dev.scroll("down")
    _press(dev, "Appearance")
    assert _press(dev, "Dark mode").changed
    assert next((i, v) for i, _, _, v, _ in dev.shown() if i == "dark_mode") == ("dark_mode", "1")
    assert dev.back().changed
    assert dev.screen == "settings"
    assert dev.back().changed
    assert dev.screen == "welcome"
    assert "Theme: Dark" in _labels(dev)
    assert not dev.back().changed
    _press(dev, "Settings")
    assert dev.back().changed
    assert dev.snapshot().screen == "Welcome"


def test_sim_relaunch_open_and_submit() -> None:
    """`open` follows a deep link onto the back stack; the keyboard's enter submits the form
    typed into; a relaunch starts over on the first screen with the fields empty (a switch,
    app data, is kept); `launch` of the running app changes nothing."""
    dev = make_sim_device("sim:settings-ios")
    snap = dev.snapshot()
    email = next(c.ref for c in snap.candidates if c.name == "Email")
    dev.fill(snap.pin(email), InputValue.model_validate({"name": "email", "value": "a@b.co"}))
    assert dev.submit().changed
    assert dev.screen == "password"
    assert dev.open_link("acme://settings").changed
    assert dev.screen == "settings"
    assert dev.back().changed
    assert dev.screen == "password"
    assert not dev.launch().changed
    dev.values["dark_mode"] = "1"
    assert dev.launch(relaunch=True).changed
    assert (dev.screen, dev.values.get("email"), dev.values["dark_mode"]) == ("email", None, "1")
    with pytest.raises(Exception, match="no link 'acme://nowhere'"):
        dev.open_link("acme://nowhere")


def _sent(platform: Platform, selector: dict[str, str], *replies: dict[str, Any], act: Any):
    wire = ScriptedDaemon([OK_OPEN, *replies])
    dev = AgentDeviceDevice(
        wire.transport, token="tok-123", platform=platform, device=selector, app="com.acme"
    )
    dev.open()
    result = act(dev)
    return result, [(b["command"], b["positionals"], b["flags"]) for b in wire.requests[1:]]


SETTLE = {"settle": True, "settleQuietMs": 300, "timeoutMs": 5000}


@pytest.mark.parametrize(("platform", "selector"), [IOS, ANDROID])
def test_agent_device_scroll_and_back_are_its_settled_commands(
    platform: Platform, selector: dict[str, str]
) -> None:
    """`scroll <direction> --settle` and `back --settle`, the settle diff read as a press's."""
    reply = fx("press_signin_welcome")
    result, sent = _sent(platform, selector, reply, act=lambda d: d.scroll("down"))
    assert sent == [("scroll", ["down"], SETTLE)]
    assert result.changed
    result, sent = _sent(platform, selector, fx("press_forgot_nochange"), act=lambda d: d.back())
    assert sent == [("back", [], SETTLE)]
    assert not result.changed


@pytest.mark.parametrize(("platform", "selector"), [IOS, ANDROID])
def test_agent_device_launch_open_submit_and_wait(
    platform: Platform, selector: dict[str, str]
) -> None:
    """relaunch: `open <app> --relaunch`; open: `open <app> <url>`; submit: `keyboard enter`;
    wait: `wait text <text> <ms>`: each read by the snapshot after it."""
    flags = {"platform": platform.value, **selector}
    ok, snap = {"ok": True, "data": {}}, fx("snapshot_welcome")
    result, sent = _sent(platform, selector, ok, snap, act=lambda d: d.launch(relaunch=True))
    assert sent == [
        ("open", ["com.acme"], {**flags, "relaunch": True}),
        ("snapshot", [], {"snapshotInteractiveOnly": True}),
    ]
    assert result.changed
    _, sent = _sent(platform, selector, ok, snap, act=lambda d: d.open_link("acme://settings"))
    assert sent[0] == ("open", ["com.acme", "acme://settings"], flags)
    _, sent = _sent(platform, selector, ok, snap, act=lambda d: d.submit())
    assert sent[0] == ("keyboard", ["enter"], {})
    seen, sent = _sent(platform, selector, ok, snap, act=lambda d: d.wait("Welcome", 2.5))
    assert sent[0] == ("wait", ["text", "Welcome", "2500"], {})
    assert seen is True


def test_agent_device_on_linux_refuses_what_its_target_cannot() -> None:
    """On the Linux target: scroll, back and wait are agent-device's; launch, relaunch, open
    and submit are refused with the reason, before anything is sent."""
    wire = ScriptedDaemon([OK_OPEN])
    dev = AgentDeviceDevice(wire.transport, token="tok-123", platform=Platform.LINUX)
    dev.open()
    assert dev.actions() == {"scroll", "back", "wait"}
    assert "no keyboard enter" in dev.action_refusal("submit")
    assert "no deep links" in dev.action_refusal("open")
    with pytest.raises(UnsupportedActionError, match="cannot submit"):
        dev.submit()
    with pytest.raises(UnsupportedActionError, match="cannot relaunch"):
        dev.launch(relaunch=True)
    assert len(wire.requests) == 1  # the open only
