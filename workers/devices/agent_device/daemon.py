"""Start, find and stop an agent-device daemon: one daemon and one state dir per device.

The daemon (`node <pkg>/dist/src/internal/daemon.js`) keeps the environment it was started with
(DISPLAY, DBUS_SESSION_BUS_ADDRESS, PATH), so each device gets its own daemon, started with
exactly the environment that device needs; `start_daemon` takes that environment explicitly and
reads nothing from `os.environ`. It writes `$AGENT_DEVICE_STATE_DIR/daemon.json` (mode 0600):
`port`, `token`, `pid`, `version`, `transport`, and `httpPort` in http/dual mode.

Two things learned on the Linux target (see docs/devices.md):

- agent-device claims devices host-wide in `~/.agent-device/device-claims` (override:
  `AGENT_DEVICE_CLAIMS_DIR`), and the Linux desktop is one device (`local:linux:none:local`)
  whatever the DISPLAY. Two daemons on two displays would refuse each other with a
  non-retriable DEVICE_IN_USE, so a Linux-desktop daemon gets its own claims dir.
- A daemon without DBUS_SESSION_BUS_ADDRESS makes its AT-SPI helper autolaunch a new session
  bus and accessibility bus on the same display, which takes over the display's a11y bus socket
  and hides every running app from later snapshots. `linux_desktop_env` refuses that.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from workers.core.errors import ConfigError, FatalDeviceError, ToolMissingError
from workers.devices.agent_device.owner import Owner, clear_owner, write_owner
from workers.devices.agent_device.secrets import install_shim, mark_daemon
from workers.processes import Child, Stoppable, pid_alive, spawn

SUPPORTED_DAEMON_VERSIONS = frozenset({"0.21.5"})
"""agent-device versions whose wire this adapter was checked against (the pinned lockfile)."""
ServerMode = Literal["socket", "http", "dual"]
DEFAULT_PACKAGE_DIR = (
    Path(__file__).resolve().parents[3]
    / "deploy"
    / "agent-device"
    / "node_modules"
    / "agent-device"
)
DAEMON_ENTRY = Path("dist") / "src" / "internal" / "daemon.js"


class DaemonInfo(BaseModel):
    """`daemon.json`, as the daemon writes it. The token never appears in a repr."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    port: int
    token: SecretStr
    pid: int
    version: str
    transport: str = "socket"
    http_port: int | None = Field(default=None, alias="httpPort")
    state_dir: str = Field(default="", alias="stateDir")


def read_daemon_info(state_dir: Path) -> DaemonInfo | None:
    """The daemon's `daemon.json` in `state_dir`, or None while there is none (yet)."""
    path = state_dir / "daemon.json"
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return DaemonInfo.model_validate(json.loads(raw))
    except (json.JSONDecodeError, ValidationError):
        return None  # half-written; the caller polls again


def linux_desktop_env(
    *,
    display: str,
    dbus_session_bus_address: str,
    home: str,
    path: str = "/usr/bin:/bin",
    xdg_runtime_dir: str | None = None,
) -> dict[str, str]:
    """The environment a Linux-desktop daemon needs: its display and session bus, and
    `/usr/bin` first on PATH (its AT-SPI helper runs `python3` and needs Debian's `gi`)."""
    if not display:
        raise ConfigError("a Linux-desktop daemon needs DISPLAY, e.g. ':99'")
    if not dbus_session_bus_address:
        raise ConfigError(
            "a Linux-desktop daemon needs DBUS_SESSION_BUS_ADDRESS",
            hint="without it the AT-SPI helper autolaunches a second bus and hijacks the "
            "display's accessibility bus; start `dbus-launch` and pass its address",
        )
    parts = [p for p in path.split(os.pathsep) if p and p != "/usr/bin"]
    env = {
        "DISPLAY": display,
        "DBUS_SESSION_BUS_ADDRESS": dbus_session_bus_address,
        "HOME": home,
        "PATH": os.pathsep.join(["/usr/bin", *parts]),
    }
    if xdg_runtime_dir:
        env["XDG_RUNTIME_DIR"] = xdg_runtime_dir
    return env


@dataclass
class DaemonProcess(Stoppable):
    """A daemon this process started, in its own process group, and owns (`owner.json`, see
    `agent_device.owner`). `stop()` ends the group: SIGTERM, a grace period, then SIGKILL (its
    helpers, e.g. the AT-SPI snapshot helper, go with it), and removes the owner file."""

    child: Child
    state_dir: Path
    info: DaemonInfo
    _stopped: bool = field(default=False, repr=False)

    @property
    def log_path(self) -> Path:
        return self.child.log

    def alive(self) -> bool:
        return self.child.alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.child.stop(timeout_s)
        clear_owner(self.state_dir, self.child.pid)


def start_daemon(
    state_dir: Path,
    *,
    env: dict[str, str],
    package_dir: Path = DEFAULT_PACKAGE_DIR,
    node: str = "node",
    server_mode: ServerMode = "dual",
    claims_dir: Path | None = None,
    idle_timeout_ms: int | None = None,
    ready_timeout_s: float = 20.0,
) -> DaemonProcess:
    """Start a daemon with its own `state_dir` and exactly `env` (plus its AGENT_DEVICE_*
    settings), wait for its `daemon.json`, record this process as its owner (`owner.json`),
    and return a handle.

    `claims_dir`: where it records device claims; give each Linux-desktop daemon its own
    (e.g. `state_dir / "claims"`). None keeps agent-device's host-wide default, which is right
    for real simulators/emulators shared by several daemons on one host.

    A Linux-desktop daemon (`DISPLAY` in `env`) gets goalfleet's xdotool shim first on its PATH,
    so a secret is typed from a FIFO, never from a command line (`agent_device.secrets`).
    """
    entry = package_dir / DAEMON_ENTRY
    if not entry.is_file():
        raise ToolMissingError(
            f"agent-device is not installed at {package_dir}",
            hint="run `npm ci` in deploy/agent-device (see README)",
        )
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    stale = state_dir / "daemon.json"
    if stale.exists():
        info = read_daemon_info(state_dir)
        if info is not None and pid_alive(info.pid):
            raise ConfigError(
                f"a daemon (pid {info.pid}) already runs with state dir {state_dir}",
                hint="one daemon per state dir: reuse it or stop it first",
            )
        stale.unlink()
    full_env, shimmed = _daemon_env(state_dir, env, server_mode, claims_dir, idle_timeout_ms)
    log_path = state_dir / "daemon.stdout.log"
    try:
        child = spawn([node, str(entry)], env=full_env, log=log_path, name="agent-device")
    except FileNotFoundError as exc:
        raise ToolMissingError(f"{node!r} (Node.js) is not on PATH") from exc
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if not child.alive():
            child.stop()  # whatever it started before it exited
            raise FatalDeviceError(
                f"the agent-device daemon exited with {child.returncode} before it was ready",
                code="DAEMON_START",
                hint=f"see {log_path}",
            )
        info = read_daemon_info(state_dir)
        if info is not None and info.pid == child.pid:
            write_owner(state_dir, Owner.this_process(child.pid, env))
            if shimmed:
                mark_daemon(state_dir, child.pid)
            return DaemonProcess(child=child, state_dir=state_dir, info=info)
        time.sleep(0.02)
    child.stop()
    raise FatalDeviceError(
        f"the agent-device daemon wrote no daemon.json within {ready_timeout_s:.0f} s",
        code="DAEMON_START",
        hint=f"see {log_path}",
    )


def _daemon_env(
    state_dir: Path,
    env: dict[str, str],
    server_mode: ServerMode,
    claims_dir: Path | None,
    idle_timeout_ms: int | None,
) -> tuple[dict[str, str], bool]:
    """`env` with the daemon's AGENT_DEVICE_* settings, and for a Linux-desktop daemon the
    xdotool shim's dir first on PATH; and whether the shim is there."""
    full_env = dict(env)
    full_env["AGENT_DEVICE_STATE_DIR"] = str(state_dir)
    full_env["AGENT_DEVICE_DAEMON_SERVER_MODE"] = server_mode
    full_env["AGENT_DEVICE_NO_UPDATE_NOTIFIER"] = "1"
    if claims_dir is not None:
        claims_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        full_env["AGENT_DEVICE_CLAIMS_DIR"] = str(claims_dir)
    if idle_timeout_ms is not None:
        full_env["AGENT_DEVICE_DAEMON_IDLE_TIMEOUT_MS"] = str(idle_timeout_ms)
    shim_dir = install_shim(state_dir, full_env.get("PATH", "")) if "DISPLAY" in env else None
    if shim_dir is not None:
        full_env["PATH"] = os.pathsep.join([str(shim_dir), full_env["PATH"]])
    return full_env, shim_dir is not None
