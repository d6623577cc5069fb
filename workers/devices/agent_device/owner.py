"""Who owns the agent-device daemon of a state dir, and what becomes of one left behind.

`start_daemon` writes `owner.json` beside the daemon's `daemon.json`: the process that started
the daemon (its pid and start time, so a reused pid is not taken for it), the daemon's pid, and
the DISPLAY and DBUS_SESSION_BUS_ADDRESS the daemon serves. Before a device is opened,
`claim_state_dir` looks at what the state dir holds:

- no live daemon: start one;
- a daemon this process owns, serving this display and bus: reuse it;
- a daemon another live process owns: `DaemonOwnedError` (one device, one driver), whatever
  display it serves;
- anything else (its owner died, no owner file, another display or bus): stop it with its
  whole process group (its open session and device claim go with it) and start a fresh one.
  A daemon serving another display or bus is never reused.

A daemon normally dies with its owner (`spawn` sets PR_SET_PDEATHSIG), but not when its owner
started it from another thread (the quarantine probe) or when it is killed in the middle of
its shutdown; and a dying daemon still answers for a moment. `release_state_dir` stops a
daemon whose owner is gone (a worker at stop, for its pool children's daemons).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from workers.core.errors import FatalDeviceError
from workers.processes import pid_alive, process_started, stop_group

__all__ = [
    "OWNER_FILE",
    "DaemonOwnedError",
    "Found",
    "Owner",
    "claim_state_dir",
    "read_owner",
    "release_state_dir",
    "write_owner",
]

_log = structlog.get_logger("goalfleet.device.agent_device")

OWNER_FILE = "owner.json"
STOP_GRACE_S = 8.0
"""A daemon closes its sessions and releases its claims on SIGTERM (~1.5 s on the Linux target)."""


class DaemonOwnedError(FatalDeviceError, code="DAEMON_OWNED"):
    """Another live process owns the daemon of this device's state dir."""


class Found(enum.Enum):
    """What `claim_state_dir` found in the state dir."""

    NONE = "none"  # no live daemon: start one
    OURS = "ours"  # this process's daemon, serving this display and bus: reuse it
    REPLACED = "replaced"  # a daemon left behind was stopped: start a fresh one


class Owner(BaseModel):
    """`owner.json`: who started the daemon of a state dir, and what it serves."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    pid: int
    pid_started: int | None
    daemon_pid: int
    display: str = ""
    dbus_address: str = ""

    @classmethod
    def this_process(cls, daemon_pid: int, env: Mapping[str, str]) -> Owner:
        pid = os.getpid()
        return cls(
            pid=pid,
            pid_started=process_started(pid),
            daemon_pid=daemon_pid,
            display=env.get("DISPLAY", ""),
            dbus_address=env.get("DBUS_SESSION_BUS_ADDRESS", ""),
        )

    def alive(self) -> bool:
        """The owner process still runs (the same one: a reused pid has another start time)."""
        return pid_alive(self.pid) and process_started(self.pid) == self.pid_started

    def is_this_process(self) -> bool:
        return self.pid == os.getpid() and self.alive()

    def serves(self, env: Mapping[str, str]) -> bool:
        return self.display == env.get("DISPLAY", "") and self.dbus_address == env.get(
            "DBUS_SESSION_BUS_ADDRESS", ""
        )


def write_owner(state_dir: Path, owner: Owner) -> None:
    """Write `owner.json` (mode 0600) whole: a reader sees the old file or the new one."""
    tmp = state_dir / f".{OWNER_FILE}.{os.getpid()}"
    tmp.write_text(owner.model_dump_json(), encoding="utf-8")
    tmp.chmod(0o600)
    tmp.replace(state_dir / OWNER_FILE)


def read_owner(state_dir: Path) -> Owner | None:
    try:
        return Owner.model_validate_json((state_dir / OWNER_FILE).read_bytes())
    except (FileNotFoundError, ValidationError):
        return None


def clear_owner(state_dir: Path, daemon_pid: int) -> None:
    """Remove `owner.json` if it still names `daemon_pid` (a successor's stays)."""
    owner = read_owner(state_dir)
    if owner is not None and owner.daemon_pid == daemon_pid:
        (state_dir / OWNER_FILE).unlink(missing_ok=True)


def claim_state_dir(state_dir: Path, env: Mapping[str, str]) -> Found:
    """Decide about the daemon of `state_dir` before a device is opened with `env`: see the
    module docstring."""
    daemon_pid = _live_daemon(state_dir)
    if daemon_pid is None:
        _forget(state_dir)
        return Found.NONE
    owner = read_owner(state_dir)
    if owner is not None and owner.daemon_pid == daemon_pid and owner.alive():
        if owner.is_this_process() and owner.serves(env):
            return Found.OURS
        where = f"DISPLAY {owner.display or '-'}"
        raise DaemonOwnedError(
            f"the agent-device daemon in {state_dir} (pid {daemon_pid}, {where}) belongs to "
            f"process {owner.pid}, which still runs",
            hint="one device, one driver: stop that process first, or give this one its own "
            "HOME (the state dir is under $HOME/.cache/goalfleet)",
        )
    why = (
        "no owner file"
        if owner is None or owner.daemon_pid != daemon_pid
        else "its owner died"
        if owner.serves(env)
        else "its owner died; it serves another display or bus"
    )
    _log.warning("daemon_left_behind", state_dir=str(state_dir), pid=daemon_pid, why=why)
    started = time.monotonic()
    stop_group(daemon_pid, STOP_GRACE_S)
    _forget(state_dir)
    _log.info(
        "daemon_stopped",
        state_dir=str(state_dir),
        pid=daemon_pid,
        ms=round((time.monotonic() - started) * 1000),
    )
    return Found.REPLACED


def release_state_dir(state_dir: Path) -> bool:
    """Stop the daemon of `state_dir` if its owner is gone or is this process (a worker at
    stop); True if one was stopped. A live owner's daemon is left alone."""
    daemon_pid = _live_daemon(state_dir)
    if daemon_pid is None:
        return False
    owner = read_owner(state_dir)
    mine = owner is not None and owner.daemon_pid == daemon_pid
    if mine and owner is not None and owner.alive() and not owner.is_this_process():
        return False  # a live owner's daemon
    stop_group(daemon_pid, STOP_GRACE_S)
    _forget(state_dir)
    _log.info("daemon_released", state_dir=str(state_dir), pid=daemon_pid)
    return True


def _live_daemon(state_dir: Path) -> int | None:
    """The pid of the live daemon of `state_dir`: by its `daemon.json`, else by its
    `daemon.lock` (a daemon removes `daemon.json` early in its shutdown, then still holds the
    lock for a second or two, and a new daemon started meanwhile would exit at once)."""
    for name in ("daemon.json", "daemon.lock"):
        try:
            pid = json.loads((state_dir / name).read_bytes()).get("pid")
        except (FileNotFoundError, json.JSONDecodeError, AttributeError):
            continue
        if isinstance(pid, int) and _is_daemon_of(pid, state_dir):
            return pid
    return None


def _is_daemon_of(pid: int, state_dir: Path) -> bool:
    """`pid` is alive and is an agent-device daemon of `state_dir` (by its environment), so a
    reused pid is never stopped."""
    if not pid_alive(pid):
        return False
    if not sys.platform.startswith("linux"):
        return True  # no /proc to check it by: the pid of a live daemon.json
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except FileNotFoundError:
        return False
    except PermissionError:
        return True  # another user's process: stopping it fails, and start_daemon refuses
    wanted = f"AGENT_DEVICE_STATE_DIR={state_dir}".encode()
    return wanted in raw.split(b"\0")


def _forget(state_dir: Path) -> None:
    """Remove what a daemon that is gone left: its `daemon.json` and `owner.json`."""
    for name in ("daemon.json", OWNER_FILE):
        with contextlib.suppress(FileNotFoundError):
            (state_dir / name).unlink()
