"""`probe_device`: what a device backend needs on this host, in goalfleet's own words.

Each case gets the environment it describes (a PATH of its own, a HOME of its own); the tools
it finds there are real executables: stand-ins for adb and xcrun (no Android SDK or Mac here)
that answer as those tools do, and node linked from this host when it has one. The real Linux
desktop is probed in tests/unit/test_worker_setup.py and tests/agent_device.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.core.errors import SetupError
from workers.devices.agent_device.daemon import DAEMON_ENTRY
from workers.devices.probe import probe_device

IOS = "ios:00000000-0000-0000-0000-000000000000"
ANDROID = "android:emulator-5554"
NODE = shutil.which("node")


def tool(bin_dir: Path, name: str, script: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(f"#!/bin/sh\n{script}\n")
    (bin_dir / name).chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """An empty PATH dir of the test's own (node linked in when this host has it)."""
    d = tmp_path / "bin"
    d.mkdir()
    if NODE:
        (d / "node").symlink_to(NODE)
    return d


def env_of(tmp_path: Path, bin_dir: Path, **extra: str) -> dict[str, str]:
    return {"PATH": str(bin_dir), "HOME": str(tmp_path / "home"), **extra}


def refused(spec: str, env: dict[str, str], **kwargs: object) -> SetupError:
    with pytest.raises(SetupError) as info:
        probe_device(spec, env, **kwargs)  # type: ignore[arg-type]
    line = str(info.value)
    assert "\n" not in line
    assert "run devices" not in line  # agent-device's advice, not ours
    return info.value


def test_sim_needs_nothing(tmp_path: Path):
    probe_device("sim:signin-ios", {})


def test_ios_on_linux(tmp_path: Path, bin_dir: Path):
    err = refused(IOS, env_of(tmp_path, bin_dir), host="linux")
    assert err.message.startswith(f"{IOS}: iOS simulators and devices are driven through Xcode")
    assert "this host runs linux" in err.message
    assert "Mac" in err.hint


def test_ios_on_a_mac_without_xcode(tmp_path: Path, bin_dir: Path):
    err = refused(IOS, env_of(tmp_path, bin_dir), host="darwin")
    assert "xcrun is not on PATH" in err.message
    assert "xcode-select --install" in err.hint


def test_ios_on_a_mac_without_node(tmp_path: Path):
    bare = tmp_path / "bare"
    tool(bare, "xcrun", "exit 0")
    err = refused(IOS, env_of(tmp_path, bare), host="darwin")
    assert "Node.js (node), which runs the agent-device daemon, is not on PATH" in err.message
    assert "make agent-device" in err.hint


@pytest.mark.skipif(NODE is None, reason="node is not installed on this host")
def test_agent_device_package_missing(tmp_path: Path, bin_dir: Path):
    tool(bin_dir, "xcrun", "exit 0")
    err = refused(IOS, env_of(tmp_path, bin_dir), host="darwin", package_dir=tmp_path / "none")
    assert "the agent-device package is not installed" in err.message
    assert err.hint == "run `make agent-device` in the goalfleet checkout"


def test_android_without_adb(tmp_path: Path, bin_dir: Path):
    err = refused(ANDROID, env_of(tmp_path, bin_dir))
    assert err.message.startswith(f"{ANDROID}: adb is not on PATH nor under $ANDROID_HOME")
    assert "apt-get install adb" in err.hint


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("echo \"error: device 'emulator-5554' not found\" >&2; exit 1", "not found"),
        ("echo offline", "(offline)"),
        ("echo unauthorized", "(unauthorized)"),
    ],
)
def test_android_device_not_ready(tmp_path: Path, bin_dir: Path, answer: str, shown: str):
    """adb is there (a stand-in answering as adb does), the device is not: refused, with adb's
    word for it."""
    tool(bin_dir, "adb", f'[ "$*" = "-s emulator-5554 get-state" ] || exit 9\n{answer}')
    err = refused(ANDROID, env_of(tmp_path, bin_dir))
    assert err.message.startswith(f"{ANDROID}: adb does not see emulator-5554 as a ready device")
    assert shown in err.message
    assert "`adb devices`" in err.hint


@pytest.mark.skipif(NODE is None, reason="node is not installed on this host")
def test_android_adb_under_android_home_and_a_ready_device(tmp_path: Path, bin_dir: Path):
    """agent-device also finds adb in $ANDROID_HOME/platform-tools; a device in state `device`
    passes."""
    sdk = tmp_path / "sdk"
    sdk.mkdir()
    tool(sdk / "platform-tools", "adb", "echo device")
    package = tmp_path / "agent-device"  # installed, as `make agent-device` leaves it
    (package / DAEMON_ENTRY).parent.mkdir(parents=True)
    (package / DAEMON_ENTRY).write_text("")
    probe_device(ANDROID, env_of(tmp_path, bin_dir, ANDROID_HOME=str(sdk)), package_dir=package)


@pytest.mark.parametrize("missing", ["DISPLAY", "DBUS_SESSION_BUS_ADDRESS"])
def test_linux_without_its_desktop(tmp_path: Path, bin_dir: Path, missing: str):
    env = env_of(tmp_path, bin_dir, DISPLAY=":99", DBUS_SESSION_BUS_ADDRESS="unix:path=/x")
    del env[missing]
    err = refused("agent-device:linux", env)
    assert err.message.startswith(f"agent-device:linux: {missing} is not set")
    assert "DISPLAY and DBUS_SESSION_BUS_ADDRESS" in err.hint


def free_display() -> str:
    for n in range(900, 999):
        if not Path(f"/tmp/.X11-unix/X{n}").exists():  # noqa: S108
            return f":{n}"
    raise AssertionError("no free display number")


def test_linux_nothing_on_the_display(tmp_path: Path, bin_dir: Path):
    display = free_display()
    env = env_of(tmp_path, bin_dir, DISPLAY=display, DBUS_SESSION_BUS_ADDRESS="unix:path=/x")
    err = refused("agent-device:linux", env)
    assert err.message == f"agent-device:linux: no X server answers on DISPLAY {display}"


def test_linux_a_display_that_is_not_one(tmp_path: Path, bin_dir: Path):
    env = env_of(tmp_path, bin_dir, DISPLAY="nonsense", DBUS_SESSION_BUS_ADDRESS="unix:path=/x")
    assert "is not an X display" in refused("agent-device:linux", env).message


@contextlib.contextmanager
def x_listener() -> Iterator[int]:
    """A socket listening on X's TCP port of some display number N (6000 + N)."""
    for number in range(500, 1000):
        try:
            server = socket.create_server(("127.0.0.1", 6000 + number))
        except OSError:
            continue
        with server:
            yield number
        return
    raise AssertionError("no free X TCP port")


def test_linux_nothing_on_the_bus(tmp_path: Path, bin_dir: Path):
    """An X server answers (a listening socket of the test's own, on TCP: `host:N`), the bus
    does not."""
    with x_listener() as number:
        bus = f"unix:path={tmp_path}/no-bus,guid=0123"
        env = env_of(tmp_path, bin_dir, DISPLAY=f"127.0.0.1:{number}", DBUS_SESSION_BUS_ADDRESS=bus)
        err = refused("agent-device:linux", env)
    assert err.message == (
        "agent-device:linux: no D-Bus session bus answers on DBUS_SESSION_BUS_ADDRESS "
        f"unix:path={tmp_path}/no-bus"
    )
    assert "dbus-daemon --session" in err.hint
