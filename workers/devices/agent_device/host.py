"""`AgentDeviceHost`: a worker's agent-device device across its runs (the `DeviceHost` seam).

Kept for the life of the worker's pool child: the daemon (`KeptDaemon`: started once,
health-checked before every run, replaced when dead or wedged) and, on the Linux target, the
app under test (`LinuxApp`, started from the worker's `--app-command` on its display) and the
session (the app is reset under it; a fatal device error in a run drops it). Per run: the app
reset as the run asks (`prepare`), then the device (`open`), whose `close` ends the run. On iOS
and Android the reset is agent-device's own (`agent_device.reset`), done by the `open` of a
session per run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from pathlib import Path

from workers.core.app import AppConfig, AppRequest, AppUnderTest, ResetPolicy, app_for_run
from workers.core.device_hooks import DeviceCommand, DeviceHook, with_hooks
from workers.core.errors import ConfigError, DeviceError, EmptySnapshotError, FatalDeviceError
from workers.core.model import Platform
from workers.core.ports import DevicePort
from workers.devices.agent_device.daemon import DEFAULT_PACKAGE_DIR
from workers.devices.agent_device.device import DEFAULT_SETTLE_QUIET_MS, AgentDeviceDevice
from workers.devices.agent_device.keeper import KeptDaemon
from workers.devices.agent_device.launch import ensure_daemon, resolve_spec
from workers.devices.agent_device.linux_app import LinuxApp
from workers.devices.agent_device.reset import NO_RESET, reset_plan

__all__ = ["APP_READY_TIMEOUT_S", "AgentDeviceHost", "open_device", "open_probe"]

APP_READY_TIMEOUT_S = 20.0
"""How long a (re)started Linux app may take to show in an accessibility snapshot."""
_POLL_S = 0.05


class AgentDeviceHost:
    """One agent-device device, kept by one process (not thread-safe: one run at a time)."""

    def __init__(
        self,
        spec: str,
        *,
        app: AppConfig | None = None,
        env: Mapping[str, str] | None = None,
        state_root: Path | None = None,
        package_dir: Path = DEFAULT_PACKAGE_DIR,
        settle_quiet_ms: int = DEFAULT_SETTLE_QUIET_MS,
        app_ready_timeout_s: float = APP_READY_TIMEOUT_S,
        role: str = "",
    ) -> None:
        self.target = resolve_spec(spec, env=env, state_root=state_root, role=role)
        self.served = app
        self.keeper = KeptDaemon(self.target, package_dir=package_dir)
        self._settle_quiet_ms = settle_quiet_ms
        self._ready_timeout_s = app_ready_timeout_s
        self.linux_app = (
            LinuxApp(app.command, env=self.target.daemon_env, base_dir=self.target.state_dir)
            if self.target.platform is Platform.LINUX and app is not None and app.command
            else None
        )
        self._next: AppUnderTest | None = None
        self._prepared = False
        self._session: AgentDeviceDevice | None = None
        """On Linux, one session for run after run (the app is reset under it, not by it)."""
        self._session_daemon = 0
        self.quick_effects = True
        """Each run's device takes the remembered-action hint (`AgentDeviceDevice`)."""

    def prepare(self, asked: AppRequest | None, reset: ResetPolicy | None) -> AppUnderTest | None:
        app = app_for_run(self.served, asked, reset)
        if self.target.platform is Platform.LINUX and app is not None:
            if self.linux_app is None and app.reset is not ResetPolicy.NONE:
                raise ConfigError(
                    f"reset {app.reset} on the Linux target needs the app's command",
                    hint="start the worker with --app-command '<the command that starts it>'",
                )
            if app.reset is ResetPolicy.REINSTALL:
                raise ConfigError(
                    "reset reinstall is for iOS and Android apps; on the Linux target use "
                    "relaunch or clear-state"
                )
        self._next, self._prepared = app, True
        return app

    def open(self, run_id: str) -> DevicePort:  # noqa: ARG002 - one device, any run
        app = self._next if self._prepared else app_for_run(self.served, None, None)
        self._next, self._prepared = None, False
        daemon = self.keeper.ready()
        if self._session is not None and self._session_daemon != daemon.child.pid:
            self._drop_session()  # its daemon was replaced
        linux = self.target.platform is Platform.LINUX
        started = False
        if self.linux_app is not None:
            started = self.linux_app.reset(app.reset if app is not None else ResetPolicy.NONE)
        dev = self._session or AgentDeviceDevice.connect(
            self.target.state_dir,
            platform=self.target.platform,
            device=self.target.device,
            app=app.id if app is not None and not linux else None,
            reset=NO_RESET
            if linux
            else reset_plan(app, binary=self.served.path if self.served else ""),
            settle_quiet_ms=self._settle_quiet_ms,
            info=daemon.info,  # checked at its start, health-checked just now
            display=self.target.daemon_env.get("DISPLAY") if linux else None,
        )
        dev.quick_effects = self.quick_effects
        if not linux:
            return dev  # a session per run: the app's reset is part of its `open`
        self._session, self._session_daemon = dev, daemon.child.pid
        try:
            if started:
                self._wait_for_app(dev)
        except BaseException:
            self._drop_session()
            raise
        run = _RunSession()
        # `close` ends the run, not the session (saving its open and close, ~50-110 ms each)
        return with_hooks(dev, run, close=lambda: self.end_run(dev, failed=run.failed))

    def close(self) -> None:
        try:
            self._drop_session()
            if self.linux_app is not None:
                self.linux_app.stop()
        finally:
            self.keeper.stop()

    def end_run(self, dev: AgentDeviceDevice, *, failed: bool) -> None:
        """A run on the kept session ended: forget it, or drop the session after a fatal
        device error (the next run opens a fresh one)."""
        if failed:
            self._drop_session()
        else:
            dev.end_run()

    def _drop_session(self) -> None:
        dev, self._session = self._session, None
        if dev is not None:
            with contextlib.suppress(DeviceError):
                dev.close()

    def _wait_for_app(self, dev: AgentDeviceDevice) -> None:
        """Until the (re)started app shows in a snapshot (AT-SPI registers it a moment after
        its window maps)."""
        assert self.linux_app is not None  # noqa: S101 - only called when it started one
        deadline = time.monotonic() + self._ready_timeout_s
        while True:
            self.linux_app.check_alive()
            try:
                dev.snapshot()
            except EmptySnapshotError:
                if time.monotonic() > deadline:
                    raise FatalDeviceError(
                        f"the app {self.linux_app.argv[0]!r} did not show in a snapshot within "
                        f"{self._ready_timeout_s:g} s",
                        code="APP_START",
                        hint=f"see {self.linux_app.base_dir / 'app.log'}",
                    ) from None
                time.sleep(_POLL_S)
            else:
                return


def open_probe(
    spec: str,
    *,
    app: AppConfig | None,
    env: Mapping[str, str] | None = None,
    state_root: Path | None = None,
) -> DevicePort:
    """The quarantine probe's device, the device's reset policy applied before it is judged:
    on the Linux target with the worker's app command, the app relaunched (an instance of the
    probe's own) and waited for, so a device whose app died is judged on a fresh one, and one
    whose app cannot start fails the probe saying why (it exited, it never showed, it is not
    there); elsewhere the app's own reset at `open`. A daemon of its own (`+probe`); `close`
    stops the probe's app and daemon."""
    host = AgentDeviceHost(spec, app=app, env=env, state_root=state_root, role="probe")
    try:
        host.prepare(None, ResetPolicy.RELAUNCH if host.linux_app is not None else None)
        dev = host.open("probe")
    except BaseException:
        host.close()
        raise

    def close() -> None:
        try:
            dev.close()
        finally:
            host.close()

    return with_hooks(dev, close=close)


def open_device(
    spec: str,
    *,
    env: Mapping[str, str] | None = None,
    state_root: Path | None = None,
    role: str = "",
) -> AgentDeviceDevice:
    """`agent-device:linux`, `ios:<udid>`, `android:<serial>` → a connected device, its daemon
    its own (a worker keeps one across runs instead: `agent_device.host`).

    Reuses this process's live daemon of its state dir (`state_dir_for`), or starts one (stopped
    on `close()`), stopping one a dead owner left; refuses a live owner's. `env`: `resolve_spec`."""
    target = resolve_spec(spec, env=env, state_root=state_root, role=role)
    daemon = ensure_daemon(target)
    on_close = daemon.stop if daemon is not None else None
    try:
        dev = AgentDeviceDevice.connect(
            target.state_dir,
            platform=target.platform,
            device=target.device,
            display=target.daemon_env.get("DISPLAY"),
        )
    except BaseException:
        if on_close is not None:
            on_close()
        raise
    dev._on_close = on_close  # noqa: SLF001 - set by this module's own factory
    return dev


class _RunSession(DeviceHook):
    """One run on the host's kept Linux session: notes a fatal device error, so the run's
    close (`AgentDeviceHost.end_run`, not the session's) drops the session after one."""

    failed = False

    def after(self, command: DeviceCommand) -> None:
        if isinstance(command.error, FatalDeviceError):
            self.failed = True
