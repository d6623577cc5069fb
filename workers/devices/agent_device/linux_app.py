"""`LinuxApp`: the app under test on a Linux desktop target, started by the worker that drives
it, on that worker's display and session bus, and reset before each run.

The command is the worker's configuration (`goalfleet worker --app-command`), split like a shell
would split it and run without one; what the app needs in its environment it sets itself
(`env NAME=value /usr/bin/app`). Its environment is the daemon's (DISPLAY, the session bus,
HOME, XDG_RUNTIME_DIR, PATH) plus XDG config/data/cache/state dirs of its own under the state
dir, which `clear-state` empties: nothing of the worker's own environment (its secrets) reaches
it. One app per display: agent-device's Linux `open` attaches to the one that runs.

| policy | what it does |
| --- | --- |
| `relaunch` | stop the app (its whole process group), start the command again |
| `clear-state` | stop it, empty its XDG dirs, start it again |
| `none` | start it if it does not run, else leave it |
| `reinstall` | refused: nothing is installed on this target |
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

from workers.core.app import ResetPolicy
from workers.core.errors import ConfigError, FatalDeviceError
from workers.processes import Child, spawn

__all__ = ["STOP_GRACE_S", "LinuxApp"]

STOP_GRACE_S = 5.0
XDG_DIRS = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


class LinuxApp:
    """The one app of a display, owned by the process that started it (it dies with it)."""

    def __init__(self, command: str, *, env: Mapping[str, str], base_dir: Path) -> None:
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise ConfigError(f"--app-command {command!r} does not parse: {exc}") from exc
        if not self.argv:
            raise ConfigError("--app-command is empty; give the command that starts the app")
        self.command = command
        self.base_dir = base_dir
        self._env = {k: v for k, v in env.items() if k != "NO_AT_BRIDGE"}
        self._child: Child | None = None
        self.launches = 0

    @property
    def child(self) -> Child | None:
        return self._child

    def running(self) -> bool:
        return self._child is not None and self._child.alive()

    def reset(self, policy: ResetPolicy) -> bool:
        """Bring the app to the state `policy` asks for; True when it was (re)started."""
        if policy is ResetPolicy.REINSTALL:
            raise ConfigError(
                "reset reinstall is for iOS and Android apps; on the Linux target use "
                "relaunch or clear-state"
            )
        if policy is ResetPolicy.NONE and self.running():
            return False
        self.stop()
        data = self.base_dir / "app-data"
        if policy is ResetPolicy.CLEAR_STATE:
            shutil.rmtree(data, ignore_errors=True)
        env = dict(self._env)
        for name in XDG_DIRS:
            where = data / name.removeprefix("XDG_").removesuffix("_HOME").lower()
            where.mkdir(parents=True, exist_ok=True, mode=0o700)
            env[name] = str(where)
        try:
            self._child = spawn(self.argv, env=env, log=self.base_dir / "app.log", name="app")
        except FileNotFoundError as exc:
            raise ConfigError(
                f"--app-command: {self.argv[0]!r} was not found",
                hint="give the app's full path, e.g. /usr/bin/gnome-calculator",
            ) from exc
        self.launches += 1
        return True

    def check_alive(self) -> None:
        """Raise when the app exited (it crashed at start, or on its own)."""
        child = self._child
        if child is not None and not child.alive():
            raise FatalDeviceError(
                f"the app {self.argv[0]!r} exited with {child.returncode}",
                code="APP_EXITED",
                hint=f"see {child.log}: {child.tail(300)}",
            )

    def stop(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.stop(STOP_GRACE_S)
