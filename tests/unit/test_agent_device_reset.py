"""The contract of a run's reset on iOS and Android: the exact agent-device commands, positionals
and flags the adapter sends for each policy, through the daemon's real JSON-RPC framing
(`ScriptedDaemon`). Pinned against agent-device 0.21.5's wire (its `settings clear-app-state
<app>`, `reinstall <app> <path>`, `open <app>` with `relaunch`); there is no simulator or
emulator on this host, so these are not run against a real one."""

from __future__ import annotations

from typing import Any

import pytest
from test_agent_device_adapter import OK_OPEN, ScriptedDaemon

from workers.core.app import AppConfig, AppRequest, AppUnderTest, ResetPolicy, app_for_run
from workers.core.errors import ConfigError
from workers.core.model import Platform
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.agent_device.reset import reset_plan

OK = {"ok": True, "data": {}}
IOS = (Platform.IOS, {"udid": "AAAA-1111"})
ANDROID = (Platform.ANDROID, {"serial": "emulator-5554"})


def sent(platform: Platform, selector: dict[str, str], app: AppUnderTest, binary: str = ""):
    """What goes over the wire when a session opens `app` with its reset: (command,
    positionals, flags) per request, without the request id and the recording's path."""
    plan = reset_plan(app, binary=binary)
    wire = ScriptedDaemon([*([OK] * len(plan.before_open)), OK_OPEN])
    dev = AgentDeviceDevice(
        wire.transport, token="tok-123", platform=platform, device=selector, app=app.id, reset=plan
    )
    dev.open()
    out: list[tuple[str, list[str], dict[str, Any]]] = []
    for body in wire.requests:
        assert body["session"] == "goalfleet"
        out.append((body["command"], body["positionals"], body["flags"]))
    return out


@pytest.mark.parametrize(("platform", "selector"), [IOS, ANDROID])
def test_relaunch_is_open_with_relaunch(platform: Platform, selector: dict[str, str]):
    """`relaunch`: one `open <app>` with `relaunch: true` (the CLI's `open <app> --relaunch`)."""
    app = AppUnderTest(id="com.example.app", reset=ResetPolicy.RELAUNCH)
    flags = {"platform": platform.value, **selector}
    assert sent(platform, selector, app) == [
        ("open", ["com.example.app"], {**flags, "relaunch": True}),
    ]


@pytest.mark.parametrize(("platform", "selector"), [IOS, ANDROID])
def test_clear_state_is_settings_clear_app_state_then_a_relaunch(
    platform: Platform, selector: dict[str, str]
):
    """`clear-state`: `settings clear-app-state <app>` on the device, then `open --relaunch`."""
    app = AppUnderTest(id="com.example.app", reset=ResetPolicy.CLEAR_STATE)
    flags = {"platform": platform.value, **selector}
    assert sent(platform, selector, app) == [
        ("settings", ["clear-app-state", "com.example.app"], flags),
        ("open", ["com.example.app"], {**flags, "relaunch": True}),
    ]


@pytest.mark.parametrize(
    ("platform", "selector", "binary"),
    [(*IOS, "/builds/Example.app"), (*ANDROID, "/builds/example.apk")],
)
def test_reinstall_is_reinstall_from_the_binary_then_a_relaunch(
    platform: Platform, selector: dict[str, str], binary: str
):
    """`reinstall`: `reinstall <app> <binary>` on the device, then `open --relaunch`."""
    app = AppUnderTest(id="com.example.app", reset=ResetPolicy.REINSTALL)
    flags = {"platform": platform.value, **selector}
    assert sent(platform, selector, app, binary) == [
        ("reinstall", ["com.example.app", binary], flags),
        ("open", ["com.example.app"], {**flags, "relaunch": True}),
    ]


def test_none_opens_the_app_as_it_is():
    """`none`: a plain `open <app>`: a running app is reused as the last run left it."""
    app = AppUnderTest(id="com.example.app", reset=ResetPolicy.NONE)
    assert sent(*IOS, app) == [
        ("open", ["com.example.app"], {"platform": "ios", "udid": "AAAA-1111"})
    ]


def test_reinstall_without_a_binary_is_refused_before_the_wire():
    """No binary to install: a ConfigError naming the worker flag, and nothing is sent."""
    app = AppUnderTest(id="com.example.app", reset=ResetPolicy.REINSTALL)
    with pytest.raises(ConfigError, match="--app-path"):
        reset_plan(app)


def test_the_request_picks_the_reset_and_the_worker_names_the_rest():
    """The request's reset wins over the device's; id, command and version are the worker's."""
    served = AppConfig(id="signin", command="/usr/bin/app", version="1.2")
    app = app_for_run(served, AppRequest(id="signin"), ResetPolicy.CLEAR_STATE)
    assert app == AppUnderTest(
        id="signin", command="/usr/bin/app", version="1.2", reset=ResetPolicy.CLEAR_STATE
    )
    assert app_for_run(served, None, None) == app.model_copy(update={"reset": "relaunch"})


@pytest.mark.parametrize(
    ("asked", "match"),
    [
        (AppRequest(id="other"), "app.id 'other' is not the app this worker serves"),
        (AppRequest(id="signin", version="2.0"), "app.version '2.0'"),
    ],
)
def test_an_app_the_device_does_not_serve_is_a_configuration_error(asked, match):
    """Another app, or another version of it: the run fails as a configuration error (not
    the device's fault), naming the field."""
    served = AppConfig(id="signin", version="1.2")
    with pytest.raises(ConfigError, match=match):
        app_for_run(served, asked, None)


def test_a_reset_with_no_app_anywhere_names_the_fix():
    """A reset asked of a worker that serves no app, for a request that names none."""
    with pytest.raises(ConfigError, match="--app-id"):
        app_for_run(None, None, ResetPolicy.RELAUNCH)
