"""The daemon's process handling, with a stand-in `daemon.js` run by the real Node (no desktop
needed): `DaemonProcess.stop` ends the daemon's whole process group, helpers included, and
`open_device`'s launcher reuses a live daemon but not a dead one's `daemon.json`."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from workers.core.model import Platform
from workers.core.processes import pid_alive
from workers.devices.agent_device_daemon import DAEMON_ENTRY, start_daemon
from workers.devices.agent_device_launch import DeviceTarget, ensure_daemon

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
