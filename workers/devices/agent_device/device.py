"""`AgentDeviceDevice`: the device port over an agent-device daemon (npm `agent-device` 0.21.5).

One device per worker: an iOS simulator (udid), an Android emulator (serial), or the Linux
desktop. It talks to the daemon directly through a `DaemonTransport` (the TCP socket by default,
or HTTP JSON-RPC); the CLI would cost ~200 ms of Node start-up per command.

What it does at this edge:

- checks the daemon's version (and, over HTTP, `rpcProtocolVersion`) at connect;
- snapshots with `snapshotInteractiveOnly`; an empty tree on success is `EmptySnapshotError`;
- presses/fills only pinned refs (`@e5~s652468`) with `settle`, and reads the settle diff;
- fills a secret with `recordAs` (recording armed at open: no literal in agent-device's replies,
  state, scripts); on Linux as a placeholder, its value over a FIFO to xdotool, never on a command
  line (`agent_device.secrets.typed_value`); elsewhere the literal goes once, over loopback;
- never logs or raises a typed value: the echoed `text` is dropped, errors from a fill are
  scrubbed, and values of secrets it has typed are masked in later snapshots;
- maps every agent-device error code to `workers.core.errors` (see `map_daemon_error`);
- logs each command at debug level: command, pinned ref, duration, outcome;
- checks a remembered action's effect by re-snapshots, not a settle window (`agent_device.quick`).

Beside it: `agent_device.launch` finds and starts a spec's daemon, `agent_device.daemon` owns
it, `agent_device.host` keeps it for a worker, `agent_device.replies` reads replies.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import structlog

from workers.core.errors import (
    ConfigError,
    DeviceError,
    EmptySnapshotError,
    FatalDeviceError,
    ProtocolError,
)
from workers.core.model import ActionResult, Direction, InputValue, Platform, Snapshot
from workers.core.ports import (
    DEVICE_ACTIONS,
    Device,
    DeviceAction,
    UnsupportedActionError,
)
from workers.core.projection import build_snapshot
from workers.core.screen import require_pinned
from workers.core.shots import Screenshot
from workers.core.video import Recording, VideoUnavailableError
from workers.devices.agent_device.daemon import DaemonInfo
from workers.devices.agent_device.launch import (
    check_daemon,
    find_daemon,
)
from workers.devices.agent_device.quick import Look, quick_effect, screen_look
from workers.devices.agent_device.replies import (
    daemon_ms,
    map_daemon_error,
    read_node,
    refs_generation,
    settle_result,
)
from workers.devices.agent_device.reset import NO_RESET, ResetPlan
from workers.devices.agent_device.secrets import SecretChannel, record_name, typed_value
from workers.devices.agent_device.shots import Bounds, capture
from workers.devices.agent_device.video import DaemonRecording
from workers.devices.agent_device.wire import (
    DaemonTransport,
    HttpTransport,
    JsonObject,
    SocketTransport,
)
from workers.devices.video import X11Recording

LINUX_CANNOT: dict[DeviceAction, str] = {
    "launch": "on the Linux target the worker starts the app itself (`--app-command`); a run "
    "gets a fresh one through the worker's reset policy, not mid-journey",
    "relaunch": "on the Linux target the worker starts the app itself (`--app-command`); a "
    "run gets a fresh one through the worker's reset policy, not mid-journey",
    "open": "the Linux desktop has no deep links (agent-device opens apps there, not URLs)",
    "submit": "agent-device 0.21.5's Linux interactor has no keyboard enter; press the "
    "form's button instead",
}
"""What the Linux target cannot do, and why. Its scroll (an xdotool wheel over the screen)
and back (alt+Left, which GTK honours only where the app binds it) are agent-device's own;
wait is its `wait text`."""

__all__ = [
    "AgentDeviceDevice",
    "check_daemon",
    "map_daemon_error",
    "record_name",
]

_log = structlog.get_logger("goalfleet.device.agent_device")

REDACTED = "[redacted]"
MASK = "**********"
DEFAULT_SESSION = "goalfleet"
DEFAULT_SETTLE_QUIET_MS = 300
"""agent-device's default is 500; 300 keeps a margin for slower apps than the GTK one (150 was
enough there); `ActionResult.settled` says when the window ran out."""
DEFAULT_ACTION_TIMEOUT_MS = 5000
TransportKind = Literal["socket", "http"]
_LEFTOVER_SESSION = ("can only arm a fresh session", "Session already active")
"""agent-device 0.21.5's INVALID_ARGS messages for an `open` of a session already open."""


class AgentDeviceDevice(Device):
    """The device port over one agent-device session. Not thread-safe: one per worker."""

    def __init__(
        self,
        transport: DaemonTransport,
        *,
        token: str,
        platform: Platform,
        session: str = DEFAULT_SESSION,
        device: Mapping[str, str] | None = None,
        app: str | None = None,
        record_script: Path | None = None,
        settle_quiet_ms: int = DEFAULT_SETTLE_QUIET_MS,
        action_timeout_ms: int = DEFAULT_ACTION_TIMEOUT_MS,
        clock: Callable[[], float] = time.perf_counter,
        on_close: Callable[[], None] | None = None,
        secret_channel: SecretChannel | None = None,
        reset: ResetPlan = NO_RESET,
        display: str | None = None,
    ) -> None:
        """`device`: the selector flags (`{"udid": ...}`, `{"serial": ...}`); `app`: a bundle
        id / package to open, or None to attach to what runs (Linux). `record_script`: where
        the armed recording is published on close; needed for sensitive fills. `reset`: the
        commands sent before the session's `open`, and the flags added to it
        (`agent_device.reset`). `display`: the Linux target's X display, which its videos
        film (`agent_device.video`)."""
        self._transport = transport
        self._display = display
        self._token = token
        self._platform = platform
        self.session = session
        self._device = dict(device or {})
        self._app = app
        self._record_script = record_script
        self.settle_quiet_ms = settle_quiet_ms
        self.action_timeout_ms = action_timeout_ms
        self._clock = clock
        self._on_close = on_close
        self._secret_channel = secret_channel
        self._reset = reset
        self._quick = False
        self.quick_effects = True
        """Take the remembered-action hint (False: settle every action, as before issue 25;
        `bench_replay` compares the two)."""
        self._last: Snapshot | None = None
        self._next: Snapshot | None = None
        self._looks: dict[str, Look] = {}
        self._secrets: set[str] = set()
        self._bounds = Bounds()
        self._opened = False
        self.last_daemon_ms: float | None = None  # the daemon's own time of the last command

    @classmethod
    def connect(
        cls,
        state_dir: Path,
        *,
        platform: Platform,
        transport: TransportKind = "socket",
        session: str = DEFAULT_SESSION,
        device: Mapping[str, str] | None = None,
        app: str | None = None,
        arm_recording: bool = True,
        settle_quiet_ms: int = DEFAULT_SETTLE_QUIET_MS,
        action_timeout_ms: int = DEFAULT_ACTION_TIMEOUT_MS,
        reset: ResetPlan = NO_RESET,
        info: DaemonInfo | None = None,
        display: str | None = None,
    ) -> AgentDeviceDevice:
        """Find the daemon by its `daemon.json` and check it (or take a kept daemon's `info`),
        then open the session."""
        info = info or find_daemon(state_dir)
        wire: DaemonTransport
        if transport == "http":
            if info.http_port is None:
                raise ConfigError(
                    "the daemon has no HTTP port; start it with server mode http or dual"
                )
            wire = HttpTransport("127.0.0.1", info.http_port, info.token.get_secret_value())
        else:
            wire = SocketTransport("127.0.0.1", info.port)
        record = (
            state_dir / "scripts" / f"{session}-{uuid.uuid4().hex[:12]}.ad"
            if arm_recording
            else None
        )
        if record is not None:
            record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        dev = cls(
            wire,
            token=info.token.get_secret_value(),
            platform=platform,
            session=session,
            device=device,
            app=app,
            record_script=record,
            settle_quiet_ms=settle_quiet_ms,
            action_timeout_ms=action_timeout_ms,
            secret_channel=SecretChannel.of_daemon(state_dir, info.pid),
            reset=reset,
            display=display,
        )
        try:
            dev.open()
        except BaseException:
            wire.close()
            raise
        return dev

    @property
    def platform(self) -> Platform:
        return self._platform

    def open(self) -> None:
        """Open the session. A session of this name left open (by a run killed mid-way, on a
        daemon that outlived it) is closed and opened again: the daemon refuses to re-open it
        ("Session already active", or "can only arm a fresh session" with a recording)."""
        selector = {"platform": self._platform.value, **self._device}
        for command, args, extra in self._reset.before_open:  # the app's reset, if any
            self._call(command, list(args), {**selector, **extra})
        flags: dict[str, Any] = {**selector, **self._reset.open_flags}
        if self._record_script is not None:
            flags["saveScript"] = str(self._record_script)
        positionals = [self._app] if self._app else []
        try:
            self._call("open", positionals, flags)
        except ProtocolError as exc:
            if not any(m in exc.message for m in _LEFTOVER_SESSION):
                raise
            _log.warning("leftover_session_closed", session=self.session)
            self._close_session()
            self._call("open", positionals, flags)
        self._opened = True

    def expect_known_screen(self) -> bool:
        """The next press/fill repeats a remembered one: check its effect by re-snapshots
        instead of a settle window (`agent_device.quick`)."""
        self._quick = self.quick_effects
        return self._quick

    def snapshot(self) -> Snapshot:
        if self._next is not None:  # taken by a remembered action's effect check
            snap, self._next = self._next, None
            return snap
        self._last = snap = self._snapshot_now()
        return snap

    def _snapshot_now(self) -> Snapshot:
        data = self._call("snapshot", [], {"snapshotInteractiveOnly": True})
        raw_nodes = data.get("nodes")
        generation = data.get("refsGeneration")
        if not isinstance(raw_nodes, list) or generation is None:
            raise ProtocolError("snapshot data has no 'nodes' list or no 'refsGeneration'")
        pairs = [(read_node(r, self._mask), r) for r in raw_nodes if isinstance(r, dict)]
        nodes = [n for n, _ in pairs if n]
        self._looks = {**self._looks, str(generation): screen_look(pairs)}
        self._bounds = Bounds.of(raw_nodes)
        if not nodes:
            raise EmptySnapshotError(
                "the device returned an empty accessibility tree",
                hint="on Linux: is DBUS_SESSION_BUS_ADDRESS set for the daemon, the AT-SPI bus "
                "up, and the app started with NO_AT_BRIDGE unset?",
            )
        return build_snapshot(nodes, str(generation))

    def press(self, pinned_ref: str) -> ActionResult:
        require_pinned(pinned_ref)
        return self._settled("press", pinned_ref, [pinned_ref], {})

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        require_pinned(pinned_ref)
        literal = value.reveal()
        flags: dict[str, Any] = {}
        if value.sensitive:
            if self._record_script is None:
                raise ConfigError(
                    f"input {value.name!r} is sensitive but no recording is armed",
                    hint="connect with arm_recording=True so recordAs keeps the value out of "
                    "agent-device's output",
                )
            flags["recordAs"] = record_name(value.name)
            if literal:
                self._secrets.add(literal)
        with typed_value(value, self._platform, self._secret_channel) as sent:
            return self._settled("fill", pinned_ref, [pinned_ref, sent], flags, literal=literal)

    def screenshot(self) -> Screenshot:
        """The screen the last snapshot described (`agent_device.shots`)."""
        return capture(self._call, self._bounds, self._platform)

    def record(self) -> Recording:
        """Film the app's window (Linux: ffmpeg on the display) or the device's screen
        (agent-device's `record`) for one run (`agent_device.video`)."""
        if self._platform is not Platform.LINUX:
            return DaemonRecording(self._call, self._platform)
        if not self._display:
            raise VideoUnavailableError("no X display is known for this Linux target")
        try:  # where the window is now (a relaunched app may have moved it)
            self._snapshot_now()
        except DeviceError as exc:
            raise VideoUnavailableError(f"no window to film: {exc}") from exc
        if self._bounds.window is None:
            raise VideoUnavailableError("the snapshot gave no window bounds to film")
        return X11Recording(self._display, self._bounds.window)

    # -- device actions: agent-device's own commands ----------------------------------------

    def actions(self) -> frozenset[DeviceAction]:
        if self._platform is Platform.LINUX:
            return frozenset(a for a in DEVICE_ACTIONS if a not in LINUX_CANNOT)
        return frozenset(DEVICE_ACTIONS)

    def action_refusal(self, action: DeviceAction) -> str:
        if self._platform is Platform.LINUX and action in LINUX_CANNOT:
            return f"this device cannot {action}: {LINUX_CANNOT[action]}"
        return ""

    def scroll(self, direction: Direction) -> ActionResult:
        """`scroll <direction> --settle`: the settle diff says whether the content moved."""
        self._refuse("scroll")
        return self._settled_action("scroll", [direction])

    def back(self) -> ActionResult:
        """`back --settle` (the platform's back: the app's stack, Android's back key, Linux
        alt+Left)."""
        self._refuse("back")
        return self._settled_action("back", [])

    def launch(self, *, relaunch: bool = False) -> ActionResult:
        """`open <app>` in the session (`--relaunch`: terminated first); the effect is read
        from the snapshot after it (open takes no settle)."""
        self._refuse("relaunch" if relaunch else "launch")
        if not self._app:
            raise ConfigError("this device has no app id to launch; start the worker with one")
        flags: dict[str, Any] = {"platform": self._platform.value, **self._device}
        if relaunch:
            flags["relaunch"] = True
        return self._looked("open", [self._app], flags)

    def open_link(self, target: str) -> ActionResult:
        """`open [<app>] <url>`: a deep link or URL, in the app when the device has one."""
        self._refuse("open")
        positionals = [self._app, target] if self._app else [target]
        flags = {"platform": self._platform.value, **self._device}
        return self._looked("open", positionals, flags)

    def submit(self) -> ActionResult:
        """`keyboard enter`: the keyboard's enter/go on the focused field."""
        self._refuse("submit")
        return self._looked("keyboard", ["enter"], {})

    def wait(self, text: str, timeout_s: float) -> bool:
        """`wait text <text> <timeoutMs>`, then the screen itself says (the one visibility
        predicate): agent-device's text match is not ours."""
        try:
            self._call("wait", ["text", text, str(round(timeout_s * 1000))], {})
        except DeviceError as exc:
            _log.debug("wait_not_met", code=exc.code)
        return self.snapshot().shows(text)

    def _refuse(self, action: DeviceAction) -> None:
        if why := self.action_refusal(action):
            raise UnsupportedActionError(action, why.removeprefix(f"this device cannot {action}: "))

    def _settled_action(self, command: str, positionals: list[str]) -> ActionResult:
        self._quick, self._next = False, None
        flags = {
            "settle": True,
            "settleQuietMs": self.settle_quiet_ms,
            "timeoutMs": self.action_timeout_ms,
        }
        data = self._call(command, positionals, flags)
        return settle_result(data, where=command)

    def _looked(self, command: str, positionals: list[str], flags: dict[str, Any]) -> ActionResult:
        """A command without a settle diff: its effect is the snapshot after it against the
        last one (kept for the loop's next snapshot)."""
        self._quick = False
        before = self._last
        self._call(command, positionals, flags)
        after = self._snapshot_now()
        self._last = self._next = after
        changed = before is None or before.fingerprint != after.fingerprint
        return ActionResult(changed=changed, refs_generation=after.refs_generation)

    def close(self) -> None:
        try:
            if self._opened:
                self._opened = False
                self._close_session()
        finally:
            self._transport.close()
            if self._on_close is not None:
                on_close, self._on_close = self._on_close, None
                on_close()
            if self._record_script is not None:  # armed for recordAs only: not kept
                self._record_script.unlink(missing_ok=True)

    def end_run(self) -> None:
        """Forget what one run left (typed secrets' masks, a pending effect check), the session
        staying open for the next run (`agent_device.host`, on Linux)."""
        self._secrets.clear()
        self._quick, self._next, self._last, self._looks = False, None, None, {}

    def _close_session(self) -> None:
        try:
            self._call("close", [], {})
        except FatalDeviceError as exc:
            if exc.code != "SESSION_NOT_FOUND":
                raise

    def _settled(
        self,
        command: str,
        pinned_ref: str,
        positionals: list[str],
        flags: dict[str, Any],
        *,
        literal: str | None = None,
    ) -> ActionResult:
        quick, self._quick, self._next = self._quick, False, None
        if quick:
            flags = {**flags, "timeoutMs": self.action_timeout_ms}
            self._call(command, positionals, flags, target=pinned_ref, literal=literal)
            result, self._next = quick_effect(self._snapshot_now, self._last, look=self._look)
            self._looks = {self._next.refs_generation: self._looks[self._next.refs_generation]}
            self._last = self._next
            return result
        flags = {
            **flags,
            "settle": True,
            "settleQuietMs": self.settle_quiet_ms,
            "timeoutMs": self.action_timeout_ms,
        }
        data = self._call(command, positionals, flags, target=pinned_ref, literal=literal)
        data.pop("text", None)  # fill echoes the literal (or ${NAME} with recordAs)
        return settle_result(data, where=f"{command} {pinned_ref}")

    def _call(
        self,
        command: str,
        positionals: list[str],
        flags: dict[str, Any],
        *,
        target: str = "",
        literal: str | None = None,
    ) -> JsonObject:
        body: JsonObject = {
            "session": self.session,
            "command": command,
            "positionals": positionals,
            "flags": flags,
            "meta": {"requestId": uuid.uuid4().hex},
            "token": self._token,
        }
        started = self._clock()
        try:
            envelope = self._transport.request(body)
        except DeviceError as exc:
            self._log_command(command, target, (self._clock() - started) * 1000, exc.code)
            raise
        elapsed_ms = (self._clock() - started) * 1000
        if envelope.get("ok") is True:
            data = envelope.get("data")
            data = dict(data) if isinstance(data, dict) else {}
            self.last_daemon_ms = daemon_ms(data)
            self._log_command(
                command, target, elapsed_ms, "ok", refs_generation=refs_generation(data)
            )
            return data
        error = envelope.get("error")
        error = error if isinstance(error, dict) else {"code": "UNKNOWN", "message": "no error"}
        failure = map_daemon_error(
            error, command=command, target=target, scrub=self._scrubber(literal)
        )
        outcome = str(error.get("code") or "UNKNOWN")
        self._log_command(
            command, target, elapsed_ms, outcome, reason=getattr(failure, "reason", None)
        )
        raise failure

    def _log_command(
        self, command: str, target: str, ms: float, outcome: str, **extra: object
    ) -> None:
        """The one `device_command` debug line of a command: how long the daemon call took,
        how it ended (`ok` or an error code), and `extra`."""
        _log.debug(
            "device_command",
            command=command,
            session=self.session,
            target=target or None,
            duration_ms=round(ms, 2),
            outcome=outcome,
            **extra,
        )

    def _look(self, snap: Snapshot | None) -> Look | None:
        return self._looks.get(snap.refs_generation) if snap is not None else None

    def _scrubber(self, literal: str | None) -> Callable[[str], str]:
        secrets = [s for s in {*self._secrets, literal or ""} if s]

        def scrub(text: str) -> str:
            for s in secrets:
                text = text.replace(s, REDACTED)
            return text

        return scrub

    def _mask(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, MASK)
        return text
