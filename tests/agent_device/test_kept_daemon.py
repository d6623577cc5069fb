"""A daemon kept per worker process, against the real daemon on the Linux target: started once
and reused run after run, health-checked before each, and replaced when it died or is wedged
(SIGSTOPped: alive, but answering nothing); `stop()` leaves no daemon behind."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from ad_support import App, daemons_under

from testing.linux_desktop import LinuxDesktop
from workers.core.model import Platform
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.agent_device.keeper import HEALTH_TIMEOUT_S, KeptDaemon
from workers.devices.agent_device.launch import resolve_spec
from workers.processes import pid_alive

SPEC = "agent-device:linux"


def keeper(desktop: LinuxDesktop, root: Path) -> KeptDaemon:
    return KeptDaemon(resolve_spec(SPEC, env=desktop.env, state_root=root))


def one_run(kept: KeptDaemon) -> bool:
    """What a run does with the daemon: health check, a session, a snapshot, close."""
    kept.ready()
    dev = AgentDeviceDevice.connect(kept.target.state_dir, platform=Platform.LINUX)
    try:
        return dev.snapshot().shows("Sign in")
    finally:
        dev.close()


def test_one_daemon_serves_run_after_run(desktop: LinuxDesktop, app: App, tmp_path: Path):
    """Three runs, one daemon: the same pid each time, started once; stop leaves none."""
    kept = keeper(desktop, tmp_path)
    try:
        pids = []
        for _ in range(3):
            assert one_run(kept)
            assert kept.daemon is not None
            pids.append(kept.daemon.child.pid)
        assert len(set(pids)) == 1
        assert kept.started == 1
    finally:
        kept.stop()
    assert daemons_under(tmp_path) == []


def test_a_dead_daemon_is_replaced_before_the_next_run(
    desktop: LinuxDesktop, app: App, tmp_path: Path
):
    """SIGKILL the kept daemon between runs: the next run's health check sees it gone and
    starts a fresh one, which drives the app."""
    kept = keeper(desktop, tmp_path)
    try:
        assert one_run(kept)
        assert kept.daemon is not None
        first = kept.daemon.child.pid
        os.kill(first, signal.SIGKILL)
        assert one_run(kept)
        assert kept.daemon.child.pid != first
        assert kept.started == 2
    finally:
        kept.stop()
    assert daemons_under(tmp_path) == []


def test_a_wedged_daemon_is_replaced_within_its_health_timeout(
    desktop: LinuxDesktop, app: App, tmp_path: Path
):
    """SIGSTOP the kept daemon (alive, its port open, answering nothing): the health check
    gives up after `HEALTH_TIMEOUT_S`, the daemon's group is killed, and a fresh one drives the
    app; the wedged one is gone."""
    kept = keeper(desktop, tmp_path)
    try:
        assert one_run(kept)
        assert kept.daemon is not None
        wedged = kept.daemon.child.pid
        os.kill(wedged, signal.SIGSTOP)
        started = time.monotonic()
        kept.ready()
        took = time.monotonic() - started
        assert kept.daemon.child.pid != wedged
        assert not pid_alive(wedged)
        assert took >= HEALTH_TIMEOUT_S
        assert one_run(kept)
        assert kept.started == 2
    finally:
        kept.stop()
    assert daemons_under(tmp_path) == []
