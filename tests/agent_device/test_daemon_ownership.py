"""A device's daemon has one owner, against the real daemon on the Linux target: a daemon a dead
owner left behind (its `goalfleet` session still open) is replaced, a live owner's is refused,
one serving another display is never reused, and `open` recovers a leftover session."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ad_support import EMAIL, PASSWORD, App, daemons_under, kill_owner, start_leftover_owner

from testing.linux_desktop import LinuxDesktop, start_linux_desktop
from workers.core.errors import EmptySnapshotError
from workers.core.model import Platform
from workers.devices.agent_device.daemon import DaemonProcess, read_daemon_info
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.agent_device.host import open_device
from workers.devices.agent_device.launch import state_dir_for
from workers.devices.agent_device.owner import DaemonOwnedError, read_owner
from workers.devices.agent_device.wire import SocketTransport
from workers.processes import spawn, stop_group

SPEC = "agent-device:linux"
FILL = re.compile(r'"command": "fill"|\bcommand=fill\b')
"""A fill's request-log line, in the console or the JSON log format."""


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (kv.decode(errors="replace").partition("=") for kv in raw.split(b"\0") if kv)
    return {k: v for k, _, v in pairs}


def wait_gone(root: Path, timeout_s: float = 20.0) -> list[int]:
    """Poll until no daemon under `root` is left; what is left at the deadline."""
    deadline = time.monotonic() + timeout_s
    while (left := daemons_under(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def state_root(tmp_path: Path) -> Iterator[Path]:
    """A state root of its own; whatever daemon a test leaves under it is stopped after."""
    root = tmp_path / "state"
    root.mkdir()
    yield root
    for pid in daemons_under(root):
        stop_group(pid, 5.0)


def test_a_dead_owners_daemon_with_an_open_session_is_replaced(
    desktop: LinuxDesktop, app: App, state_root: Path, tmp_path: Path
):
    """The owner of a daemon dies with the `goalfleet` session open and the daemon survives:
    the next open stops that daemon (its whole group) and starts a fresh one, which drives the
    app; closing the device leaves no daemon behind."""
    owner, first = start_leftover_owner(desktop, state_root, tmp_path / "owner.log")
    kill_owner(owner)
    assert daemons_under(state_root), "the leftover daemon should have outlived its owner"
    dev = open_device(SPEC, env=desktop.env, state_root=state_root)
    try:
        info = read_daemon_info(state_dir_for(SPEC, env=desktop.env, state_root=state_root))
        assert info is not None
        assert info.pid != first
        assert first not in daemons_under(state_root)
        owner_file = read_owner(state_dir_for(SPEC, env=desktop.env, state_root=state_root))
        assert owner_file is not None
        assert owner_file.pid == os.getpid()
        assert owner_file.display == desktop.display
        assert dev.snapshot().shows("Sign in")
    finally:
        dev.close()
    assert wait_gone(state_root) == []
    assert app.state()["screen"] == "signin"


def test_an_open_right_after_the_owner_died_waits_out_its_dying_daemon(
    desktop: LinuxDesktop, app: App, state_root: Path, tmp_path: Path
):
    """The owner started its daemon from its main thread and is SIGKILLed: the daemon gets
    SIGTERM and shuts down over a second or so (its session open, its `daemon.json` gone early,
    its lock still held). An open at once stops it for good and drives the app on a fresh one."""
    owner, first = start_leftover_owner(desktop, state_root, tmp_path / "owner.log", opener="main")
    kill_owner(owner)
    dev = open_device(SPEC, env=desktop.env, state_root=state_root)
    try:
        assert first not in daemons_under(state_root)
        assert dev.snapshot().shows("Sign in")
    finally:
        dev.close()
    assert wait_gone(state_root) == []


def test_two_displays_under_one_state_root_get_two_daemons(
    desktop: LinuxDesktop, app: App, state_root: Path, tmp_path: Path
):
    """A live owner's daemon on display A, and the device opened for display B under the same
    state root (one HOME): B gets a state dir and a daemon of its own, serving B (B runs no app:
    an empty tree), while A's daemon and its owner are left alone; a second open for A, from
    another process than its owner, is still refused (one device, one driver)."""
    owner, first = start_leftover_owner(desktop, state_root, tmp_path / "owner.log")
    try:
        with start_linux_desktop(tmp_path / "other") as other:
            dev = open_device(SPEC, env=other.env, state_root=state_root)
            try:
                b_dir = state_dir_for(SPEC, env=other.env, state_root=state_root)
                assert b_dir != state_dir_for(SPEC, env=desktop.env, state_root=state_root)
                info = read_daemon_info(b_dir)
                assert info is not None
                assert info.pid != first
                assert environ_of(info.pid)["DISPLAY"] == other.display
                assert first in daemons_under(state_root)  # A's daemon runs on beside it
                with pytest.raises(EmptySnapshotError):
                    dev.snapshot()
            finally:
                dev.close()
            with pytest.raises(DaemonOwnedError, match=f"process {owner.pid}"):
                open_device(SPEC, env=desktop.env, state_root=state_root)
    finally:
        kill_owner(owner)


def test_open_recovers_a_leftover_session(daemon: DaemonProcess, app: App):
    """A `goalfleet` session left open on a live daemon (its client gone without `close`): the
    next open with a recording armed closes it and opens a fresh one."""
    wire = SocketTransport("127.0.0.1", daemon.info.port)
    body = {
        "session": "goalfleet",
        "command": "open",
        "positionals": [],
        "flags": {"platform": "linux", "saveScript": str(daemon.state_dir / "leftover.ad")},
        "meta": {"requestId": uuid.uuid4().hex},
        "token": daemon.info.token.get_secret_value(),
    }
    assert wire.request(body)["ok"] is True
    wire.close()  # the client is gone; the session stays open
    dev = AgentDeviceDevice.connect(daemon.state_dir, platform=Platform.LINUX)
    try:
        assert dev.snapshot().shows("Sign in")
    finally:
        dev.close()


def test_the_quarantine_probe_opens_beside_the_pool_childs_kept_daemon(
    desktop: LinuxDesktop, app: App, state_root: Path, tmp_path: Path, monkeypatch
):
    """The worker's probe (`open_probe_device`, from the worker's own environment) while another
    live process holds the run's daemon of the device, as a pool child keeps it between runs:
    the probe gets a daemon of its own (`+probe`), snapshots the app, and stops it on close; the
    run's daemon is left alone."""
    from workers.devices.factory import open_probe_device  # noqa: PLC0415

    home = state_root / "home"
    root = home / ".cache" / "goalfleet" / "agent-device"
    owner, kept = start_leftover_owner(desktop, root, tmp_path / "owner.log", home=home)
    try:
        for key, value in {**desktop.env, "HOME": str(home)}.items():
            monkeypatch.setenv(key, value)
        device = open_probe_device(SPEC)
        try:
            assert device.snapshot().shows("Sign in")
            probe_dir = state_dir_for(SPEC, env={**desktop.env, "HOME": str(home)}, role="probe")
            info = read_daemon_info(probe_dir)
            assert info is not None
            assert info.pid != kept
        finally:
            device.close()
        assert kept in daemons_under(root)  # the run's daemon runs on
        assert not (probe_dir / "daemon.json").exists()
    finally:
        kill_owner(owner)


def test_goalfleet_run_killed_mid_run_then_the_next_run_is_done(
    desktop: LinuxDesktop, app: App, tmp_path: Path
):
    """SIGKILL `goalfleet run` after its first device action; the next `goalfleet run` on the
    device signs in (`done`), and no daemon is left after it."""
    root = desktop.home / ".cache" / "goalfleet" / "agent-device"
    env = {**os.environ, **desktop.env, "GF_TEST_PW": PASSWORD}
    argv = [
        *(sys.executable, "-m", "scheduler", "run", "--device", SPEC, "--goal", "Sign in"),
        *("--input", f"email={EMAIL}", "--secret", "password=env:GF_TEST_PW"),
        *("--loglevel", "DEBUG"),
    ]
    log = tmp_path / "killed-run.log"
    run = spawn(argv, env=env, log=log)
    try:
        deadline = time.monotonic() + 120
        while not FILL.search(log.read_text(errors="replace")):
            assert run.alive(), run.tail()
            assert time.monotonic() < deadline, run.tail()
            time.sleep(0.05)
        run.signal(signal.SIGKILL, leader_only=True)
        run.wait(timeout=10)
    finally:
        run.stop(5)
    second = spawn([*argv[:-2], "--loglevel", "WARNING"], env=env, log=tmp_path / "next.log")
    try:
        assert second.wait(timeout=180) == 0, second.tail()
    finally:
        second.stop(5)
    assert "status: done" in second.tail(), second.tail()
    assert app.state()["screen"] == "welcome"
    assert wait_gone(root) == []
