"""A private headless Linux desktop for agent-device's Linux target: Xvfb on a free display,
a D-Bus session bus, the AT-SPI accessibility bus, and (optionally) one app.

Used by the end-to-end tests, the benchmark and CI; usable by a worker that drives a desktop
app on a headless host. Everything runs with a private HOME and XDG_RUNTIME_DIR under
`base_dir`, so two stacks on one host (or a developer's own desktop) never share an
accessibility bus socket. One app per display: agent-device's `open --platform linux` with no
app attaches to the running one. `desktop_with_daemon` adds an agent-device daemon on it.

Needs Debian's xvfb, dbus, at-spi2-core (and python3-gi + gir1.2-atspi-2.0 + xdotool for the
daemon): `scripts/setup-linux-target.sh` installs them.
"""

from __future__ import annotations

import contextlib
import random
import select
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workers.core.errors import FatalDeviceError, ToolMissingError
from workers.devices.agent_device.daemon import DaemonProcess, start_daemon
from workers.processes import Child, Stoppable, spawn

AT_SPI_BUS_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
_GRACE_S = 5.0
REQUIRED_TOOLS = ("Xvfb", "dbus-daemon", "xdotool", "python3")


def missing_tools() -> list[str]:
    """What this host lacks to run the Linux target (empty when all is there)."""
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t, path="/usr/bin:/bin") is None]
    if not Path(AT_SPI_BUS_LAUNCHER).exists():
        missing.append(AT_SPI_BUS_LAUNCHER)
    return missing


@dataclass
class LinuxDesktop(Stoppable):
    """A running stack. `env` is what a daemon or an app on this display needs."""

    base_dir: Path
    display: str
    dbus_address: str
    home: Path
    runtime_dir: Path
    _children: list[Child] = field(default_factory=list, repr=False)
    app: Child | None = None

    @property
    def env(self) -> dict[str, str]:
        return {
            "DISPLAY": self.display,
            "DBUS_SESSION_BUS_ADDRESS": self.dbus_address,
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
        }

    def start_app(
        self,
        argv: Sequence[str],
        *,
        extra_env: dict[str, str] | None = None,
        ready: Callable[[], bool] | None = None,
        timeout_s: float = 15.0,
    ) -> Child:
        """Start the display's one app; wait until `ready()` (if given) says it is up."""
        if self.app is not None and self.app.alive():
            raise FatalDeviceError("this display already runs an app; one app per display")
        env = {**self.env, **(extra_env or {})}
        env.pop("NO_AT_BRIDGE", None)
        self.app = spawn(argv, env=env, log=self.base_dir / "app.log", name="app")
        self._children.append(self.app)
        if ready is not None:
            try:
                _wait(ready, timeout_s, f"the app {argv[0]!r} did not become ready", self.app)
            except FatalDeviceError as exc:
                hint = f"app.log: {self.app.tail(600)}"
                raise FatalDeviceError(exc.message, code=exc.code, hint=hint) from exc
        return self.app

    def stop(self) -> None:
        """Stop the app, the AT-SPI bus, the session bus and Xvfb (newest first), each with
        its whole process group (the a11y bus's dbus-daemon, registryd)."""
        for child in reversed(self._children):
            child.stop(_GRACE_S)
        self._children.clear()


def start_linux_desktop(base_dir: Path, *, screen: str = "1280x800x24") -> LinuxDesktop:
    """Xvfb on a free display, a session bus, and the AT-SPI bus."""
    missing = missing_tools()
    if missing:
        raise ToolMissingError(
            f"the Linux target needs {', '.join(missing)}",
            hint="run scripts/setup-linux-target.sh",
        )
    home = base_dir / "home"
    runtime = base_dir / "run"
    for d in (home, runtime):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    desk = LinuxDesktop(
        base_dir=base_dir, display="", dbus_address="", home=home, runtime_dir=runtime
    )
    try:
        _start_xvfb(desk, screen)
        _start_dbus(desk)
        _start_atspi(desk)
    except BaseException:
        desk.stop()
        raise
    return desk


@contextlib.contextmanager
def desktop_with_daemon(base_dir: Path) -> Iterator[tuple[LinuxDesktop, DaemonProcess]]:
    """A private desktop (in `base_dir/desk`) and an agent-device daemon on it with its own
    state and claims dirs (`base_dir/ad`); both stopped on the way out, the daemon first."""
    state = base_dir / "ad"
    with (
        start_linux_desktop(base_dir / "desk") as desk,
        start_daemon(state, env=desk.env, claims_dir=state / "claims") as daemon,
    ):
        yield desk, daemon


def _start_xvfb(desk: LinuxDesktop, screen: str, attempts: int = 8) -> None:
    """Xvfb on a random free display number (100-899), retried on a collision.

    Not `-displayfd`: on this Xvfb it sometimes reported a display another server held."""
    for _ in range(attempts):
        number = random.randint(100, 899)
        if Path(f"/tmp/.X{number}-lock").exists() or Path(f"/tmp/.X11-unix/X{number}").exists():  # noqa: S108
            continue
        argv = ["/usr/bin/Xvfb", f":{number}", "-screen", "0", screen, "-nolisten", "tcp"]
        xvfb = spawn(argv, env=desk.env, log=desk.base_dir / "xvfb.log", name="xvfb")
        display = f":{number}"
        deadline = time.monotonic() + 15.0
        while xvfb.alive() and time.monotonic() < deadline:
            if _x_answers(display):
                desk._children.append(xvfb)  # noqa: SLF001 - the module builds its own dataclass
                desk.display = display
                return
            time.sleep(0.05)
        xvfb.stop(_GRACE_S)
    raise FatalDeviceError(
        f"Xvfb did not start on a free display after {attempts} tries",
        code="XVFB_START",
        hint=f"see {desk.base_dir / 'xvfb.log'}",
    )


def _x_answers(display: str) -> bool:
    """Whether the X server takes a client: `xdpyinfo` when present, else its socket."""
    if shutil.which("xdpyinfo", path="/usr/bin:/bin") is None:
        return Path(f"/tmp/.X11-unix/X{display.lstrip(':')}").exists()  # noqa: S108
    done = subprocess.run(  # noqa: S603 - fixed argv
        ["/usr/bin/xdpyinfo", "-display", display],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return done.returncode == 0


def _start_dbus(desk: LinuxDesktop, timeout_s: float = 15.0) -> None:
    """A session bus in the foreground (its own group, stopped with the stack); it prints its
    address once it listens."""
    env = {k: v for k, v in desk.env.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    argv = ["/usr/bin/dbus-daemon", "--session", "--nofork", "--print-address=1"]
    bus = spawn(argv, env=env, log=desk.base_dir / "dbus.log", name="dbus", pipe_stdout=True)
    desk._children.append(bus)  # noqa: SLF001 - the module builds its own dataclass
    address = _first_line(bus, timeout_s)
    if not address:
        raise FatalDeviceError(
            f"dbus-daemon --session printed no address within {timeout_s:.0f} s "
            f"(exit status {bus.returncode})",
            code="DBUS_START",
            hint=f"see {bus.log}",
        )
    desk.dbus_address = address


def _first_line(child: Child, timeout_s: float) -> str:
    """The first line `child` prints on its stdout pipe, or "" if none comes in time."""
    out = child.proc.stdout
    if out is None:
        return ""
    ready, _, _ = select.select([out], [], [], timeout_s)
    return out.readline().decode(errors="replace").strip() if ready else ""


def _start_atspi(desk: LinuxDesktop) -> None:
    argv = [AT_SPI_BUS_LAUNCHER, "--launch-immediately"]
    atspi = spawn(argv, env=desk.env, log=desk.base_dir / "atspi.log", name="at-spi")
    desk._children.append(atspi)  # noqa: SLF001 - the module builds its own dataclass
    bus_dir = desk.runtime_dir / "at-spi"

    def bus_up() -> bool:
        return bus_dir.is_dir() and any(p.name.startswith("bus") for p in bus_dir.iterdir())

    _wait(bus_up, 15.0, "the AT-SPI bus did not come up", atspi)


def _wait(check: Callable[[], bool], timeout_s: float, what: str, child: Child) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if not child.alive():
            raise FatalDeviceError(f"{what}: it exited with {child.returncode}", code="STACK_START")
        time.sleep(0.02)
    raise FatalDeviceError(f"{what} within {timeout_s:.0f} s", code="STACK_START")
