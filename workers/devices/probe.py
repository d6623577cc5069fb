"""What a device backend needs on this host, checked before a worker registers and before
`goalfleet run` opens a device: `probe_device` raises one `SetupError` naming what is missing
and the fix in goalfleet's terms (agent-device's own advice names agent-device's commands).

- `sim:*`: nothing (in-process).
- `ios:<udid>`: a macOS host (agent-device drives simulators and devices through Xcode) with
  `xcrun`. Whether that udid is booted is not checked: no Mac here to check it on.
- `android:<serial>`: adb where the daemon will look for it (its PATH, then `platform-tools`
  under `$ANDROID_HOME` and `~/Android/Sdk`), and `adb -s <serial> get-state` saying `device`.
- `agent-device:linux`: DISPLAY and DBUS_SESSION_BUS_ADDRESS set, an X server and a session bus
  answering there, xdotool (input, and the secret channel: `agent_device.secrets`) and a python3
  that loads PyGObject's Atspi (agent-device's accessibility dump).
- every agent-device spec: Node.js on the daemon's PATH and the pinned agent-device package.

The daemon's environment is the one `agent_device.launch.resolve_spec` builds from `environ`,
so the probe looks where the daemon will.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from workers.core.errors import SetupError
from workers.devices.agent_device.daemon import DAEMON_ENTRY, DEFAULT_PACKAGE_DIR
from workers.devices.agent_device.launch import resolve_spec

__all__ = ["probe_device"]

_TIMEOUT_S = 10.0
_ATSPI_CHECK = "import gi; gi.require_version('Atspi', '2.0'); from gi.repository import Atspi"
_LINUX_TARGET_FIX = "run `make linux-target` (Xvfb, D-Bus, AT-SPI, GTK 3, xdotool; needs root)"


def probe_device(
    spec: str,
    environ: Mapping[str, str],
    *,
    host: str = sys.platform,
    package_dir: Path = DEFAULT_PACKAGE_DIR,
) -> None:
    """Raise `SetupError` unless this host can drive `spec` (a checked device spec)."""
    if spec.startswith("sim:"):
        return
    kind, _, ident = spec.partition(":")
    if kind == "ios" and host != "darwin":
        raise SetupError(
            f"{spec}: iOS simulators and devices are driven through Xcode, on a macOS host; "
            f"this host runs {host}",
            hint="run it on a Mac; this host can drive android:<serial> and "
            "agent-device:linux devices",
        )
    if spec == "agent-device:linux":
        _desktop_env(spec, environ)
    env = resolve_spec(spec, env=environ).daemon_env
    path = env.get("PATH", "")
    if kind == "ios":
        _need_tool(spec, "xcrun", path, fix="install Xcode, then run `xcode-select --install`")
    elif kind == "android":
        _android(spec, ident, env)
    else:
        _desktop(spec, env)
    _need_tool(
        spec,
        "node",
        path,
        fix="install Node.js (20 or later) and run `make agent-device`",
        what="Node.js (node), which runs the agent-device daemon,",
    )
    if not (package_dir / DAEMON_ENTRY).is_file():
        raise SetupError(
            f"{spec}: the agent-device package is not installed in {package_dir}",
            hint="run `make agent-device` in the goalfleet checkout",
        )


def _need_tool(spec: str, tool: str, path: str, *, fix: str, what: str = "") -> str:
    found = shutil.which(tool, path=path)
    if found is None:
        raise SetupError(f"{spec}: {what or tool} is not on PATH", hint=fix)
    return found


# -- android ------------------------------------------------------------------------------------


def _find_adb(env: Mapping[str, str]) -> str | None:
    """Where agent-device 0.21.5 finds adb: PATH, then `platform-tools/adb` under each SDK root
    (`$ANDROID_HOME`, `~/Android/Sdk`; the daemon gets no `$ANDROID_SDK_ROOT` from us)."""
    found = shutil.which("adb", path=env.get("PATH", ""))
    if found is not None:
        return found
    roots = [env.get("ANDROID_HOME", "").strip()]
    if env.get("HOME"):
        roots.append(str(Path(env["HOME"]) / "Android" / "Sdk"))
    for root in filter(None, roots):
        adb = Path(root) / "platform-tools" / "adb"
        if adb.is_file() and os.access(adb, os.X_OK):
            return str(adb)
    return None


def _android(spec: str, serial: str, env: Mapping[str, str]) -> None:
    adb = _find_adb(env)
    if adb is None:
        raise SetupError(
            f"{spec}: adb is not on PATH nor under $ANDROID_HOME/platform-tools or "
            "~/Android/Sdk/platform-tools",
            hint="install Android platform-tools (Debian: apt-get install adb) and put adb on "
            "PATH or set ANDROID_HOME",
        )
    try:
        done = subprocess.run(  # noqa: S603 - adb, found above, with a fixed argv
            [adb, "-s", serial, "get-state"],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
        state = done.stdout.strip() or _first_line(done.stderr)
    except subprocess.TimeoutExpired:
        state = f"no answer within {_TIMEOUT_S:.0f} s"
    if state != "device":
        raise SetupError(
            f"{spec}: adb does not see {serial} as a ready device ({state or 'no answer'})",
            hint="start the emulator or connect and authorize the device, and check that "
            f"`adb devices` lists {serial} as 'device'",
        )


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]


# -- the Linux desktop --------------------------------------------------------------------------


def _desktop_env(spec: str, environ: Mapping[str, str]) -> None:
    for var in ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS"):
        if not environ.get(var):
            raise SetupError(
                f"{spec}: {var} is not set; goalfleet drives the app on the X display and "
                "session bus it runs on",
                hint="export the DISPLAY and DBUS_SESSION_BUS_ADDRESS of the app's desktop "
                "(a headless one: docs/devices.md)",
            )


def _desktop(spec: str, env: Mapping[str, str]) -> None:
    display = env["DISPLAY"]
    family, address = _x_address(spec, display)
    if not any(_connects(family, a) for a in address):
        raise SetupError(
            f"{spec}: no X server answers on DISPLAY {display}",
            hint="start the app's desktop (headless: Xvfb) or export the DISPLAY it runs on",
        )
    bus = env["DBUS_SESSION_BUS_ADDRESS"]
    target = _bus_address(bus)
    if target is not None and not _connects(socket.AF_UNIX, target):
        raise SetupError(
            f"{spec}: no D-Bus session bus answers on DBUS_SESSION_BUS_ADDRESS {_shown_bus(bus)}",
            hint="start the desktop's session bus (dbus-daemon --session) and export the "
            "address it prints",
        )
    path = env.get("PATH", "")
    _need_tool(spec, "xdotool", path, fix=_LINUX_TARGET_FIX)
    python = _need_tool(spec, "python3", path, fix=_LINUX_TARGET_FIX)
    try:
        done = subprocess.run(  # noqa: S603 - python3, found above, with a fixed argv
            [python, "-c", _ATSPI_CHECK],
            env=dict(env),
            capture_output=True,
            timeout=30,
            check=False,
        )
        loads = done.returncode == 0
    except subprocess.TimeoutExpired:
        loads = False
    if not loads:
        raise SetupError(
            f"{spec}: {python} cannot load PyGObject's Atspi 2.0, which agent-device's "
            "accessibility dump needs",
            hint=_LINUX_TARGET_FIX,
        )


def _x_address(spec: str, display: str) -> tuple[socket.AddressFamily, list[str | tuple[str, int]]]:
    """`:99`, `unix:99.0` → the local socket (its path, then the abstract one Xorg and Xvfb
    also listen on); `host:1` → TCP port 6001."""
    where, _, screen = display.rpartition(":")
    number = screen.partition(".")[0]
    if not number.isdigit():
        raise SetupError(
            f"{spec}: DISPLAY {display!r} is not an X display", hint="give one like :99"
        )
    if where in {"", "unix"}:
        path = f"/tmp/.X11-unix/X{number}"  # noqa: S108 - X's own socket dir
        return socket.AF_UNIX, [path, "\0" + path]
    return socket.AF_INET, [(where, 6000 + int(number))]


def _bus_address(address: str) -> str | None:
    """The unix socket of the first `unix:path=` / `unix:abstract=` address, or None for a
    transport this probe does not try (tcp, launchd, ...)."""
    for part in address.split(";"):
        transport, _, params = part.partition(":")
        if transport != "unix":
            continue
        keys = dict(kv.partition("=")[::2] for kv in params.split(","))
        if keys.get("path"):
            return keys["path"]
        if keys.get("abstract"):
            return "\0" + keys["abstract"]
    return None


def _shown_bus(address: str) -> str:
    return address.partition(",guid=")[0][:200]


def _connects(family: socket.AddressFamily, address: str | tuple[str, int]) -> bool:
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(address)
    except OSError:
        return False
    return True
