"""The error paths, against the real daemon: each must arrive as our typed error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ad_support import App

from testing.linux_desktop import LinuxDesktop, start_linux_desktop
from workers.core.errors import (
    EmptySnapshotError,
    StaleRefError,
    ToolMissingError,
    TransientDeviceError,
    UnauthorizedError,
)
from workers.core.model import Platform
from workers.devices.agent_device.daemon import DaemonProcess, start_daemon
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.agent_device.wire import SocketTransport


def test_stale_pinned_ref(device: AgentDeviceDevice, app: App):
    """A ref pinned to a snapshot that an action has superseded is a StaleRefError."""
    snap = device.snapshot()
    forgot = next(c for c in snap.candidates if c.name == "Forgot password?")
    pinned = snap.pin(forgot.ref)
    device.press(pinned)
    with pytest.raises(StaleRefError) as info:
        device.press(pinned)
    assert info.value.reason in {"ref_generation_mismatch", "ref_frame_expired"}
    assert app.state()["forgot_pressed"] == 1  # the stale press did not land


def test_unknown_ref(device: AgentDeviceDevice, app: App):
    """A ref the current frame never had is stale too (re-snapshot), and nothing is pressed."""
    snap = device.snapshot()
    with pytest.raises(StaleRefError) as info:
        device.press(f"@e99~s{snap.refs_generation}")
    assert info.value.reason == "ref_not_found"
    assert app.state()["screen"] == "signin"


def test_bad_token(daemon: DaemonProcess, app: App):
    """A wrong token fails at open with UnauthorizedError."""
    dev = AgentDeviceDevice(
        SocketTransport("127.0.0.1", daemon.info.port),
        token="not-the-token",
        platform=Platform.LINUX,
    )
    with pytest.raises(UnauthorizedError):
        dev.open()
    dev.close()


def test_second_session_is_busy(device: AgentDeviceDevice, daemon: DaemonProcess):
    """The device held by one session: another session gets a retriable busy error."""
    other = AgentDeviceDevice(
        SocketTransport("127.0.0.1", daemon.info.port),
        token=daemon.info.token.get_secret_value(),
        platform=Platform.LINUX,
        session="intruder",
    )
    with pytest.raises(TransientDeviceError) as info:
        other.open()
    assert info.value.code == "DEVICE_IN_USE"
    other.close()


def test_missing_tool_android(daemon: DaemonProcess):
    """No adb on this host: opening an Android device is ToolMissingError."""
    with pytest.raises(ToolMissingError, match="adb"):
        AgentDeviceDevice.connect(daemon.state_dir, platform=Platform.ANDROID, session="droid")


def test_missing_tool_python_for_atspi(desktop: LinuxDesktop, app: App, tmp_path: Path):
    """A daemon whose PATH has no python3 cannot take an AT-SPI snapshot: ToolMissingError."""
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {**desktop.env, "PATH": str(empty_bin)}
    node = shutil.which("node")
    assert node
    with start_daemon(tmp_path / "ad", env=env, node=node, claims_dir=tmp_path / "c") as d:
        dev = AgentDeviceDevice.connect(d.state_dir, platform=Platform.LINUX)
        try:
            with pytest.raises(ToolMissingError, match="python3"):
                dev.snapshot()
        finally:
            dev.close()


def test_empty_desktop_is_an_empty_snapshot_error(tmp_path: Path):
    """A display with no app: the daemon says ok with no nodes; we raise."""
    with (
        start_linux_desktop(tmp_path / "desk") as desk,
        start_daemon(tmp_path / "ad", env=desk.env, claims_dir=tmp_path / "c") as d,
    ):
        dev = AgentDeviceDevice.connect(d.state_dir, platform=Platform.LINUX)
        try:
            with pytest.raises(EmptySnapshotError):
                dev.snapshot()
        finally:
            dev.close()
