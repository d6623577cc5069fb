"""Which agent-device daemon a device uses, and making sure it runs: a device spec becomes a
`DeviceTarget` (platform, selector, state dir, the daemon's environment), `ensure_daemon` reuses
this process's own daemon of that state dir, stops one a dead owner left behind and starts a
fresh one (`agent_device.owner`), and `find_daemon` reads its `daemon.json` and refuses a daemon
whose wire this adapter has not been checked against.

The adapter (`agent_device.AgentDeviceDevice`) talks to a daemon; this module finds and starts
one; `agent_device.daemon` owns the daemon process.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.core.errors import ConfigError, FatalDeviceError, ProtocolError
from workers.core.model import Platform
from workers.devices.agent_device.daemon import (
    DEFAULT_PACKAGE_DIR,
    SUPPORTED_DAEMON_VERSIONS,
    DaemonInfo,
    DaemonProcess,
    linux_desktop_env,
    read_daemon_info,
    start_daemon,
)
from workers.devices.agent_device.owner import Found, claim_state_dir, release_state_dir
from workers.devices.agent_device.wire import SUPPORTED_RPC_PROTOCOL, HttpTransport, JsonObject

__all__ = [
    "DeviceTarget",
    "check_daemon",
    "ensure_daemon",
    "find_daemon",
    "release_daemon",
    "resolve_spec",
    "state_dir_for",
]

LINUX_SPEC = "agent-device:linux"


def check_daemon(info: DaemonInfo, health: Mapping[str, Any] | None = None) -> None:
    """Refuse a daemon whose wire we have not checked: its version, and over HTTP its
    `rpcProtocolVersion`."""
    if info.version not in SUPPORTED_DAEMON_VERSIONS:
        raise ProtocolError(
            f"agent-device daemon {info.version} is not a version this adapter speaks "
            f"({', '.join(sorted(SUPPORTED_DAEMON_VERSIONS))})",
            hint="install the pinned version: npm ci in deploy/agent-device",
        )
    if health is not None:
        proto = health.get("rpcProtocolVersion")
        if proto != SUPPORTED_RPC_PROTOCOL:
            raise ProtocolError(
                f"the daemon speaks RPC protocol {proto!r}; this adapter speaks "
                f"{SUPPORTED_RPC_PROTOCOL}",
                hint="install the pinned agent-device version",
            )


def find_daemon(state_dir: Path) -> DaemonInfo:
    """The daemon of `state_dir`, by its `daemon.json`, checked (over HTTP, its `/health`
    too, when it serves HTTP)."""
    info = read_daemon_info(state_dir)
    if info is None:
        raise FatalDeviceError(
            f"no agent-device daemon.json in {state_dir}",
            code="DAEMON_UNREACHABLE",
            hint="start the daemon (workers.devices.agent_device.daemon.start_daemon)",
        )
    health: JsonObject | None = None
    if info.http_port is not None:
        probe = HttpTransport("127.0.0.1", info.http_port, info.token.get_secret_value())
        try:
            health = probe.health()
        finally:
            probe.close()
    check_daemon(info, health)
    return info


@dataclass(frozen=True)
class DeviceTarget:
    """One device behind one daemon: where the daemon keeps its state, the environment it
    needs, and the selector flags of the device."""

    platform: Platform
    state_dir: Path
    daemon_env: dict[str, str]
    device: dict[str, str] = field(default_factory=dict)
    """`{"udid": ...}` (iOS) or `{"serial": ...}` (Android); empty for the Linux desktop."""
    claims_dir: Path | None = None
    """A Linux-desktop daemon's own device-claims dir (see `agent_device.daemon`)."""


def state_dir_for(
    spec: str,
    *,
    env: Mapping[str, str] | None = None,
    state_root: Path | None = None,
    role: str = "",
) -> Path:
    """Where the daemon of `spec` keeps its state: `<state_root>/<key>`, by default under
    `$HOME/.cache/goalfleet/agent-device`, keyed by the device, so any number of workers on one
    host and one HOME each get their own state dir, daemon lock and daemon.

    The key is the spec (an iOS udid, an Android serial name one device); the Linux desktop is
    one spec on every display, so its key adds the display and a digest of the session bus
    (`agent-device_linux@_101-1a2b3c4d`). `role` keeps a second daemon of the same device apart
    (the worker's quarantine probe: `+probe`), since a state dir has one daemon and one owner."""
    source = os.environ if env is None else env
    home = source.get("HOME", str(Path.home()))
    root = state_root or Path(home) / ".cache" / "goalfleet" / "agent-device"
    key = spec
    if spec == LINUX_SPEC:
        bus = hashlib.sha256(source.get("DBUS_SESSION_BUS_ADDRESS", "").encode()).hexdigest()
        key = f"{spec}@{source.get('DISPLAY', '')}-{bus[:8]}"
    if role:
        key = f"{key}+{role}"
    return root / re.sub(r"[^A-Za-z0-9_.@+-]", "_", key)


def resolve_spec(
    spec: str,
    *,
    env: Mapping[str, str] | None = None,
    state_root: Path | None = None,
    role: str = "",
) -> DeviceTarget:
    """`agent-device:linux`, `ios:<udid>`, `android:<serial>` → its `DeviceTarget`, with its
    state dir (`state_dir_for`).

    `env` is the environment the daemon needs (DISPLAY and DBUS_SESSION_BUS_ADDRESS for Linux,
    PATH with xcrun/adb for iOS/Android); the composition root should pass it. Given None,
    this reads `os.environ` — the one place it does.
    """
    source = dict(os.environ if env is None else env)
    home = source.get("HOME", str(Path.home()))
    state_dir = state_dir_for(spec, env=source, state_root=state_root, role=role)
    kind, _, ident = spec.partition(":")
    if spec == LINUX_SPEC:
        daemon_env = linux_desktop_env(
            display=source.get("DISPLAY", ""),
            dbus_session_bus_address=source.get("DBUS_SESSION_BUS_ADDRESS", ""),
            home=home,
            path=source.get("PATH", "/usr/bin:/bin"),
            xdg_runtime_dir=source.get("XDG_RUNTIME_DIR"),
        )
        return DeviceTarget(Platform.LINUX, state_dir, daemon_env, claims_dir=state_dir / "claims")
    if kind in {"ios", "android"} and ident:
        daemon_env = {
            k: source[k] for k in ("PATH", "HOME", "ANDROID_HOME", "DEVELOPER_DIR") if k in source
        }
        device = {"udid": ident} if kind == "ios" else {"serial": ident}
        return DeviceTarget(Platform(kind), state_dir, daemon_env, device)
    raise ConfigError(
        f"{spec!r} is not an agent-device spec; use agent-device:linux, ios:<udid> or "
        "android:<serial>"
    )


def ensure_daemon(
    target: DeviceTarget, *, package_dir: Path = DEFAULT_PACKAGE_DIR
) -> DaemonProcess | None:
    """This process's live daemon of the target's state dir, serving the target's display and
    bus (None: stopped by whoever started it), or a new one this process started (stop it when
    done). A daemon a dead owner left there is stopped first; a live owner's is refused
    (`DaemonOwnedError`)."""
    if claim_state_dir(target.state_dir, target.daemon_env) is Found.OURS:
        return None
    return start_daemon(
        target.state_dir,
        env=target.daemon_env,
        package_dir=package_dir,
        claims_dir=target.claims_dir,
    )


def release_daemon(state_dir: Path) -> bool:
    """Stop the daemon of `state_dir` if its owner is gone or is this process (a worker at
    start and at stop); True if there was one."""
    return release_state_dir(state_dir)
