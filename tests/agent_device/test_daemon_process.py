"""The daemon's process handling, with a stand-in `daemon.js` run by the real Node (no desktop
needed): `DaemonProcess.stop` ends the daemon's whole process group, helpers included;
`open_device`'s launcher reuses this process's live daemon but not a dead one's `daemon.json`;
and a daemon's owner (`owner.json`) decides whether it is reused, refused or replaced."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from workers.core.model import Platform
from workers.devices.agent_device.daemon import DAEMON_ENTRY, start_daemon
from workers.devices.agent_device.launch import DeviceTarget, ensure_daemon, release_daemon
from workers.devices.agent_device.owner import DaemonOwnedError, read_owner, write_owner
from workers.processes import Child, pid_alive, spawn

FAKE_DAEMON = """
const fs = require("fs");
const path = require("path");
const { spawn } = require("child_process");
const dir = process.env.AGENT_DEVICE_STATE_DIR;
// a helper that ignores SIGTERM and would outlive a daemon stopped by its pid alone
const helper = spawn("/bin/sh", ["-c", 'trap "" TERM; exec sleep 300'], { stdio: "ignore" });
fs.writeFileSync(path.join(dir, "helper.pid"), String(helper.pid));
fs.writeFileSync(
  path.join(dir, "daemon.json"),
  JSON.stringify({ port: 1, token: "t", pid: process.pid, version: "0.21.5" }),
);
process.on("SIGTERM", () => process.exit(0));
setInterval(() => {}, 1000);
"""


@pytest.fixture
def fake_package(tmp_path: Path) -> Path:
    if shutil.which("node") is None:
        pytest.fail("node is not installed: make agent-device")
    pkg = tmp_path / "pkg"
    (pkg / DAEMON_ENTRY).parent.mkdir(parents=True)
    (pkg / DAEMON_ENTRY).write_text(FAKE_DAEMON)
    return pkg


def _wait_gone(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_stop_ends_the_daemons_helpers_too(fake_package: Path, tmp_path: Path) -> None:
    """The daemon exits on SIGTERM; its helper ignores SIGTERM and is SIGKILLed with the
    group, so nothing the daemon started is left running."""
    state = tmp_path / "state"
    daemon = start_daemon(state, env={"PATH": "/usr/bin:/bin"}, package_dir=fake_package)
    helper = int((state / "helper.pid").read_text())
    assert daemon.alive()
    assert pid_alive(helper)
    daemon.stop()
    assert not daemon.alive()
    assert _wait_gone(helper), "the daemon's helper outlived it"


def test_ensure_daemon_reuses_a_live_daemon_and_replaces_a_dead_one(
    fake_package: Path, tmp_path: Path
) -> None:
    """A live daemon of the state dir is reused (not ours to stop); a `daemon.json` whose pid
    is gone is replaced by a new daemon."""
    state = tmp_path / "state"
    target = DeviceTarget(Platform.ANDROID, state, {"PATH": "/usr/bin:/bin"})
    first = ensure_daemon(target, package_dir=fake_package)
    assert first is not None
    try:
        assert ensure_daemon(target, package_dir=fake_package) is None
    finally:
        first.stop()
    stale = json.loads((state / "daemon.json").read_text())
    assert stale["pid"] == first.child.pid
    assert not pid_alive(stale["pid"])
    second = ensure_daemon(target, package_dir=fake_package)
    assert second is not None
    try:
        assert second.child.pid != first.child.pid
        assert second.info.pid == second.child.pid
    finally:
        second.stop()


OWNER_SCRIPT = """
import sys, threading, time
from pathlib import Path
from workers.devices.agent_device.daemon import start_daemon
out = []
def start():
    out.append(start_daemon(Path(sys.argv[1]), env={"PATH": "/usr/bin:/bin"},
                            package_dir=Path(sys.argv[2])))
t = threading.Thread(target=start)  # from a thread: the daemon outlives this process
t.start()
t.join()
print("started", out[0].child.pid, flush=True)
time.sleep(600)
"""


def _start_owner(state: Path, package: Path, log: Path) -> tuple[Child, int]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    owner = spawn(
        [sys.executable, "-c", OWNER_SCRIPT, str(state), str(package)],
        env=env,
        log=log,
        pipe_stdout=True,
    )
    assert owner.proc.stdout is not None
    line = owner.proc.stdout.readline().decode().split()
    assert line[:1] == ["started"], owner.tail()
    return owner, int(line[1])


def test_start_daemon_records_its_owner_and_stop_removes_it(fake_package: Path, tmp_path: Path):
    """`owner.json` names this process (pid and start time), the daemon, and the display and
    bus it serves; `stop()` removes it with the daemon."""
    state = tmp_path / "state"
    env = {"PATH": "/usr/bin:/bin", "DISPLAY": ":42", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/b"}
    daemon = start_daemon(state, env=env, package_dir=fake_package)
    owner = read_owner(state)
    assert owner is not None
    assert (owner.pid, owner.daemon_pid) == (os.getpid(), daemon.child.pid)
    assert (owner.display, owner.dbus_address) == (":42", "unix:path=/b")
    assert owner.is_this_process()
    assert owner.serves(env)
    assert not owner.serves({**env, "DISPLAY": ":43"})
    assert (state / "owner.json").stat().st_mode & 0o777 == 0o600
    daemon.stop()
    assert read_owner(state) is None


def test_a_live_owners_daemon_is_refused_then_replaced_once_it_dies(
    fake_package: Path, tmp_path: Path
):
    """Another live process's daemon: `ensure_daemon` refuses it (DAEMON_OWNED) and
    `release_daemon` leaves it alone. Once that process is SIGKILLed (its daemon, started from a
    thread, lives on), `ensure_daemon` stops the daemon's whole group (its SIGTERM-proof helper
    too) and starts its own."""
    state = tmp_path / "state"
    owner, leftover = _start_owner(state, fake_package, tmp_path / "owner.log")
    helper = int((state / "helper.pid").read_text())
    target = DeviceTarget(Platform.ANDROID, state, {"PATH": "/usr/bin:/bin"})
    try:
        with pytest.raises(DaemonOwnedError, match=f"process {owner.pid}"):
            ensure_daemon(target, package_dir=fake_package)
        assert not release_daemon(state)
        assert pid_alive(leftover)
    finally:
        owner.signal(signal.SIGKILL, leader_only=True)
        owner.wait(timeout=10)
    assert pid_alive(leftover)
    mine = ensure_daemon(target, package_dir=fake_package)
    assert mine is not None
    try:
        assert mine.child.pid != leftover
        assert _wait_gone(leftover)
        assert _wait_gone(helper), "the leftover daemon's helper outlived it"
        owner_file = read_owner(state)
        assert owner_file is not None
        assert owner_file.daemon_pid == mine.child.pid
    finally:
        mine.stop()


def test_an_owner_file_naming_a_reused_pid_is_a_dead_owner(fake_package: Path, tmp_path: Path):
    """An owner pid that is alive but started at another time is another process: the daemon
    counts as left behind and is replaced."""
    state = tmp_path / "state"
    target = DeviceTarget(Platform.ANDROID, state, {"PATH": "/usr/bin:/bin"})
    first = start_daemon(state, env=target.daemon_env, package_dir=fake_package)
    try:
        owner = read_owner(state)
        assert owner is not None
        write_owner(state, owner.model_copy(update={"pid_started": (owner.pid_started or 0) + 1}))
        second = ensure_daemon(target, package_dir=fake_package)
        assert second is not None
        assert not first.alive()
        second.stop()
    finally:
        first.stop()
