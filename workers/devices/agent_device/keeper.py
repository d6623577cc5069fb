"""`KeptDaemon`: one device's agent-device daemon kept for the life of a process (a worker's
pool child), so a run pays neither the daemon's start (~0.4 s with the session's open) nor its
teardown (~0.25 s).

Started on the first `ready()`, health-checked on every later one (the process alive, its
`daemon.json` still its own, `/health` answered within `health_timeout_s`), and replaced when it
died or is wedged. The ownership rules stay those of `agent_device.owner`: the state dir is
claimed before each start (a dead owner's daemon is stopped, a live owner's refused), and this
process owns what it started. Started with idle reap off (agent-device would otherwise exit
after 5 idle minutes), since its owner decides when it ends: `stop()`, or the owner's death
(PR_SET_PDEATHSIG), or the worker's `release_device` at stop.
"""

from __future__ import annotations

import time
from pathlib import Path

import structlog

from workers.core.errors import DeviceError
from workers.devices.agent_device.daemon import (
    DEFAULT_PACKAGE_DIR,
    DaemonProcess,
    read_daemon_info,
    start_daemon,
)
from workers.devices.agent_device.launch import DeviceTarget, find_daemon
from workers.devices.agent_device.owner import Found, claim_state_dir, release_state_dir
from workers.devices.agent_device.wire import HttpTransport

__all__ = ["HEALTH_TIMEOUT_S", "KeptDaemon"]

_log = structlog.get_logger("goalfleet.device.agent_device")

HEALTH_TIMEOUT_S = 1.0
"""`/health` answers in ~2 ms on a live daemon; a daemon that takes a second is wedged."""
WEDGED_GRACE_S = 1.0
"""A wedged daemon gets this long after SIGTERM before SIGKILL (a stopped one never exits)."""


class KeptDaemon:
    """One device's daemon, kept across runs by the process that started it."""

    def __init__(
        self,
        target: DeviceTarget,
        *,
        package_dir: Path = DEFAULT_PACKAGE_DIR,
        health_timeout_s: float = HEALTH_TIMEOUT_S,
    ) -> None:
        self.target = target
        self._package_dir = package_dir
        self._health_timeout_s = health_timeout_s
        self._daemon: DaemonProcess | None = None
        self._probe: HttpTransport | None = None
        """One keep-alive HTTP client per daemon for its health checks (a new httpx client
        costs more than the check: ~50 ms against ~2 ms on a loaded host)."""
        self.started = 0
        """Daemons this keeper started (1 for a healthy life; each replacement adds one)."""

    @property
    def daemon(self) -> DaemonProcess | None:
        return self._daemon

    def ready(self) -> DaemonProcess:
        """The daemon, healthy: started on the first call, replaced when dead or wedged."""
        daemon = self._daemon
        if daemon is not None:
            why = self.unhealthy(daemon)
            if why is None:
                return daemon
            _log.warning(
                "daemon_replaced",
                state_dir=str(self.target.state_dir),
                pid=daemon.child.pid,
                why=why,
            )
            self._daemon = None
            self._close_probe()
            daemon.stop(WEDGED_GRACE_S)
        return self._start()

    def unhealthy(self, daemon: DaemonProcess) -> str | None:
        """Why `daemon` cannot take a run, or None when it can."""
        if not daemon.alive():
            return f"it exited with {daemon.child.returncode}"
        info = read_daemon_info(self.target.state_dir)
        if info is None or info.pid != daemon.child.pid:
            return "its daemon.json is gone or names another process"
        if info.http_port is None:
            return None  # a socket-only daemon: alive and its own is all we can tell
        if self._probe is None or self._probe.port != info.http_port:
            self._close_probe()
            self._probe = HttpTransport(
                "127.0.0.1",
                info.http_port,
                info.token.get_secret_value(),
                timeout_s=self._health_timeout_s,
            )
        try:
            self._probe.health()
        except DeviceError as exc:
            return f"its /health did not answer within {self._health_timeout_s:g} s ({exc.code})"
        return None

    def _close_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.close()

    def stop(self) -> None:
        """Stop the daemon (its whole process group); the next `ready()` starts a fresh one."""
        daemon, self._daemon = self._daemon, None
        self._close_probe()
        if daemon is not None:
            daemon.stop()

    def _start(self) -> DaemonProcess:
        target = self.target
        if claim_state_dir(target.state_dir, target.daemon_env) is Found.OURS:
            release_state_dir(target.state_dir)  # this process's, but not kept here: replace it
        started = time.monotonic()
        self._daemon = start_daemon(
            target.state_dir,
            env=target.daemon_env,
            package_dir=self._package_dir,
            claims_dir=target.claims_dir,
            idle_timeout_ms=0,
        )
        self.started += 1
        find_daemon(target.state_dir)  # its version and RPC protocol, once: runs trust its info
        _log.info(
            "daemon_started",
            state_dir=str(target.state_dir),
            pid=self._daemon.child.pid,
            ms=round((time.monotonic() - started) * 1000),
        )
        return self._daemon
