"""`AgentDeviceDevice`: the device port over an agent-device daemon (npm `agent-device` 0.21.5).

One device per worker: an iOS simulator (udid), an Android emulator (serial), or the Linux
desktop. It talks to the daemon directly through a `DaemonTransport` (the TCP socket by default,
or HTTP JSON-RPC); the CLI would cost ~200 ms of Node start-up per command.

What it does at this edge:

- checks the daemon's version (and, over HTTP, `rpcProtocolVersion`) at connect;
- snapshots with `snapshotInteractiveOnly`; an empty tree on success is `EmptySnapshotError`;
- presses/fills only pinned refs (`@e5~s652468`) with `settle`, and reads the settle diff;
- sends a sensitive value with `recordAs` (recording armed at open), so agent-device keeps the
  literal out of its response, state and scripts; the literal is still sent once, over loopback,
  in the fill request, because agent-device types what it is given (`AD_VAR_<NAME>` is read only
  when a recorded script is replayed, never by a live fill);
- never logs or raises a typed value: the echoed `text` is dropped, errors from a fill are
  scrubbed, and values of secrets it has typed are masked in later snapshots;
- maps every agent-device error code to `workers.core.errors` (see `map_daemon_error`);
- logs each command at debug level: command, pinned ref, duration, outcome.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import structlog

from workers.core.errors import (
    STALE_REASONS,
    AppNotInstalledError,
    ConfigError,
    DeviceError,
    DeviceNotFoundError,
    EmptySnapshotError,
    FatalDeviceError,
    ProtocolError,
    StaleRefError,
    ToolMissingError,
    TransientDeviceError,
    UnauthorizedError,
)
from workers.core.model import ActionResult, InputValue, Node, Platform, Snapshot
from workers.core.projection import build_snapshot
from workers.devices.agent_device_daemon import (
    SUPPORTED_DAEMON_VERSIONS,
    DaemonInfo,
    linux_desktop_env,
    read_daemon_info,
    start_daemon,
)
from workers.devices.agent_device_wire import (
    SUPPORTED_RPC_PROTOCOL,
    DaemonTransport,
    HttpTransport,
    JsonObject,
    SocketTransport,
)

__all__ = [
    "AgentDeviceDevice",
    "check_daemon",
    "map_daemon_error",
    "open_device",
    "record_name",
]

_log = structlog.get_logger("goalfleet.device.agent_device")

REDACTED = "[redacted]"
MASK = "**********"
DEFAULT_SESSION = "goalfleet"
DEFAULT_SETTLE_QUIET_MS = 300
"""agent-device's default is 500; on the GTK app 150 was enough (press+settle ~480 vs ~850 ms).
300 keeps a margin for slower apps; `ActionResult.settled` says when the window ran out."""
DEFAULT_ACTION_TIMEOUT_MS = 5000
SECURE_ROLES = frozenset({"password text", "securetextfield", "secure-text-field"})
SECURE_TYPES = frozenset({"securetextfield", "secure-text-field", "SecureTextField"})
TransportKind = Literal["socket", "http"]
_REF_NOT_FOUND = re.compile(r"^Ref @e\d+ not found")

_FATAL_CODES: dict[str, type[FatalDeviceError]] = {
    "TOOL_MISSING": ToolMissingError,
    "DEVICE_NOT_FOUND": DeviceNotFoundError,
    "APP_NOT_INSTALLED": AppNotInstalledError,
    "UNAUTHORIZED": UnauthorizedError,
    "INVALID_ARGS": ProtocolError,  # we built a request the daemon rejects: our bug or its version
}
_FATAL_HINTS: dict[str, str] = {
    "SESSION_NOT_FOUND": "the daemon lost the session (restart or idle reap); reconnect",
    "UNSUPPORTED_PLATFORM": "this daemon's host cannot drive that platform (iOS needs macOS)",
    "AMBIGUOUS_MATCH": "a pinned ref matched several elements; report it with the snapshot",
}


def record_name(input_name: str) -> str:
    """The agent-device variable name for an input: `password` → `PASSWORD`.

    Names must be upper-case letters, digits and `_`, and `AD_*` is reserved."""
    name = "".join(ch if ch.isalnum() else "_" for ch in input_name).upper()
    if not name or not name[0].isalpha() or name.startswith("AD_"):
        name = f"GF_{name}"
    return name


def map_daemon_error(
    error: Mapping[str, Any],
    *,
    command: str,
    target: str = "",
    scrub: Callable[[str], str] = lambda s: s,
) -> DeviceError:
    """Translate the daemon's `{code, message, hint, details{reason}, retriable}`.

    COMMAND_FAILED with a stale-ref reason → `StaleRefError`; anything marked `retriable`
    (DEVICE_IN_USE by another session of this daemon, a dropped adb link) → `TransientDeviceError`;
    DEVICE_IN_USE held by another daemon (`retriable: false`) → fatal; TOOL_MISSING,
    DEVICE_NOT_FOUND, APP_NOT_INSTALLED, UNAUTHORIZED → their fatal classes; INVALID_ARGS →
    `ProtocolError`; the rest (SESSION_NOT_FOUND, UNSUPPORTED_PLATFORM, AMBIGUOUS_MATCH,
    UNKNOWN, other COMMAND_FAILED) → `FatalDeviceError` carrying the daemon's code.
    """
    code = str(error.get("code") or "UNKNOWN")
    details = error.get("details")
    details = details if isinstance(details, Mapping) else {}
    reason = str(details.get("reason") or "")
    where = f"{command} {target}".strip()
    message = scrub(f"{where}: {error.get('message') or code}")[:500]
    hint = scrub(str(error.get("hint") or ""))[:300]
    retriable = error.get("retriable", details.get("retriable"))

    if code == "COMMAND_FAILED" and reason in STALE_REASONS:
        return StaleRefError(message, reason=reason, hint=hint)
    if code == "COMMAND_FAILED" and not reason and _REF_NOT_FOUND.match(str(error.get("message"))):
        # a pinned ref of the current complete frame whose element is gone (or has no bounds):
        # agent-device gives no reason code; re-snapshotting is the answer, as for stale refs
        return StaleRefError(message, reason="ref_not_found", hint=hint)
    if code in _FATAL_CODES:
        return _FATAL_CODES[code](message, hint=hint)
    if retriable is True or (code == "DEVICE_IN_USE" and retriable is None):
        return TransientDeviceError(message, code=code, hint=hint)
    return FatalDeviceError(
        message,
        code=code if not reason else f"{code}:{reason}",
        hint=hint or _FATAL_HINTS.get(code, ""),
    )


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


class AgentDeviceDevice:
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
    ) -> None:
        """`device`: the selector flags (`{"udid": ...}`, `{"serial": ...}`); `app`: a bundle
        id / package to open, or None to attach to what runs (Linux). `record_script`: where
        the armed recording is published on close; needed for sensitive fills."""
        self._transport = transport
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
        self._secrets: set[str] = set()
        self._opened = False
        self.last_daemon_ms: float | None = None
        """The daemon's own wall time for the last command, when it reports one."""

    # -- construction ---------------------------------------------------------------------

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
    ) -> AgentDeviceDevice:
        """Find the daemon by its `daemon.json`, check it, and open the session."""
        info = read_daemon_info(state_dir)
        if info is None:
            raise FatalDeviceError(
                f"no agent-device daemon.json in {state_dir}",
                code="DAEMON_UNREACHABLE",
                hint="start the daemon (workers.devices.agent_device_daemon.start_daemon)",
            )
        health: JsonObject | None = None
        if info.http_port is not None:
            probe = HttpTransport("127.0.0.1", info.http_port, info.token.get_secret_value())
            try:
                health = probe.health()
            finally:
                probe.close()
        check_daemon(info, health)
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
        )
        try:
            dev.open()
        except BaseException:
            wire.close()
            raise
        return dev

    # -- the port ---------------------------------------------------------------------------

    @property
    def platform(self) -> Platform:
        return self._platform

    def open(self) -> None:
        flags: dict[str, Any] = {"platform": self._platform.value, **self._device}
        if self._record_script is not None:
            flags["saveScript"] = str(self._record_script)
        positionals = [self._app] if self._app else []
        self._call("open", positionals, flags)
        self._opened = True

    def snapshot(self) -> Snapshot:
        data = self._call("snapshot", [], {"snapshotInteractiveOnly": True})
        raw_nodes = data.get("nodes")
        generation = data.get("refsGeneration")
        if not isinstance(raw_nodes, list) or generation is None:
            raise ProtocolError("snapshot data has no 'nodes' list or no 'refsGeneration'")
        nodes = [n for n in (self._node(r) for r in raw_nodes if isinstance(r, dict)) if n]
        if not nodes:
            raise EmptySnapshotError(
                "the device returned an empty accessibility tree",
                hint="on Linux: is DBUS_SESSION_BUS_ADDRESS set for the daemon, the AT-SPI bus "
                "up, and the app started with NO_AT_BRIDGE unset?",
            )
        return build_snapshot(nodes, str(generation))

    def press(self, pinned_ref: str) -> ActionResult:
        _require_pinned(pinned_ref)
        return self._settled("press", pinned_ref, [pinned_ref], {})

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        _require_pinned(pinned_ref)
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
        return self._settled("fill", pinned_ref, [pinned_ref, literal], flags, literal=literal)

    def close(self) -> None:
        try:
            if self._opened:
                self._opened = False
                try:
                    self._call("close", [], {})
                except FatalDeviceError as exc:
                    if exc.code != "SESSION_NOT_FOUND":
                        raise
        finally:
            self._transport.close()
            if self._on_close is not None:
                on_close, self._on_close = self._on_close, None
                on_close()
            if self._record_script is not None:
                # the published script holds selectors and plain literals (never a recordAs
                # value); we armed it only for recordAs, so it is not kept
                self._record_script.unlink(missing_ok=True)

    # -- internals --------------------------------------------------------------------------

    def _settled(
        self,
        command: str,
        pinned_ref: str,
        positionals: list[str],
        flags: dict[str, Any],
        *,
        literal: str | None = None,
    ) -> ActionResult:
        flags = {
            **flags,
            "settle": True,
            "settleQuietMs": self.settle_quiet_ms,
            "timeoutMs": self.action_timeout_ms,
        }
        data = self._call(command, positionals, flags, target=pinned_ref, literal=literal)
        data.pop("text", None)  # fill echoes the literal (or ${NAME} with recordAs)
        settle = data.get("settle")
        if not isinstance(settle, dict):
            raise ProtocolError(f"{command} {pinned_ref}: the reply has no settle result")
        diff = _obj(settle.get("diff"))
        summary = _obj(diff.get("summary"))
        lines = diff.get("lines")
        lines = lines if isinstance(lines, list) else []
        additions = int(summary.get("additions") or 0)
        removals = int(summary.get("removals") or 0)
        added = tuple(
            str(line["ref"])
            for line in lines
            if isinstance(line, dict) and line.get("kind") == "added" and line.get("ref")
        )
        return ActionResult(
            changed=additions + removals > 0,
            settled=bool(settle.get("settled", False)),
            additions=additions,
            removals=removals,
            refs_generation=str(settle.get("refsGeneration") or ""),
            added_refs=added,
        )

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
            _log.debug(
                "device_command",
                command=command,
                session=self.session,
                target=target or None,
                duration_ms=round((self._clock() - started) * 1000, 2),
                outcome=exc.code,
            )
            raise
        elapsed_ms = (self._clock() - started) * 1000
        if envelope.get("ok") is True:
            data = envelope.get("data")
            data = dict(data) if isinstance(data, dict) else {}
            cost = data.get("cost")
            self.last_daemon_ms = (
                float(cost["wallClockMs"])
                if isinstance(cost, dict) and isinstance(cost.get("wallClockMs"), int | float)
                else None
            )
            _log.debug(
                "device_command",
                command=command,
                session=self.session,
                target=target or None,
                duration_ms=round(elapsed_ms, 2),
                outcome="ok",
                refs_generation=_generation(data),
            )
            return data
        error = envelope.get("error")
        error = error if isinstance(error, dict) else {"code": "UNKNOWN", "message": "no error"}
        failure = map_daemon_error(
            error, command=command, target=target, scrub=self._scrubber(literal)
        )
        _log.debug(
            "device_command",
            command=command,
            session=self.session,
            target=target or None,
            duration_ms=round(elapsed_ms, 2),
            outcome=str(error.get("code") or "UNKNOWN"),
            reason=getattr(failure, "reason", None),
        )
        raise failure

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

    def _node(self, raw: Mapping[str, Any]) -> Node | None:
        ref = raw.get("ref")
        if not isinstance(ref, str) or not ref:
            return None
        role = str(raw.get("role") or "")
        typ = str(raw.get("type") or "")
        secure = (
            role.casefold() in SECURE_ROLES
            or typ in SECURE_TYPES
            or raw.get("secure") is True
            or raw.get("password") is True
        )
        value = "" if secure else self._mask(str(raw.get("value") or ""))
        label = self._mask(str(raw.get("label") or ""))
        ident = raw.get("identifier") or raw.get("resourceId") or raw.get("id") or ""
        return Node(
            ref=ref,
            type=typ,
            role=role,
            label=label,
            value=value,
            identifier=str(ident),
            enabled=raw["enabled"] if isinstance(raw.get("enabled"), bool) else None,
            hittable=raw["hittable"] if isinstance(raw.get("hittable"), bool) else None,
            secure=secure,
        )


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _generation(data: Mapping[str, Any]) -> str | None:
    settle = data.get("settle")
    if isinstance(settle, dict) and settle.get("refsGeneration") is not None:
        return str(settle["refsGeneration"])
    gen = data.get("refsGeneration")
    return None if gen is None else str(gen)


def _require_pinned(pinned_ref: str) -> None:
    """Mutations go to pinned refs only: `@e5~s652468`."""
    head, sep, gen = pinned_ref.partition("~s")
    if not (sep and head.startswith("@e") and head[2:].isdigit() and gen.isdigit()):
        raise ConfigError(f"{pinned_ref!r} is not a pinned ref; pin it as @eN~sGEN (Snapshot.pin)")


def open_device(
    spec: str,
    *,
    env: Mapping[str, str] | None = None,
    state_root: Path | None = None,
) -> AgentDeviceDevice:
    """`agent-device:linux`, `ios:<udid>`, `android:<serial>` → a connected device.

    Reuses a live daemon in `<state_root>/<spec>` or starts one there (stopped again on
    `close()`). `env` is the environment the daemon needs (DISPLAY and
    DBUS_SESSION_BUS_ADDRESS for Linux, PATH with xcrun/adb for iOS/Android); the composition
    root should pass it. Given None, this reads `os.environ` — the one place it does.
    """
    source = dict(os.environ if env is None else env)
    home = source.get("HOME", str(Path.home()))
    root = state_root or Path(home) / ".cache" / "goalfleet" / "agent-device"
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", spec)
    state_dir = root / slug
    kind, _, ident = spec.partition(":")
    device: dict[str, str] = {}
    claims_dir: Path | None = None
    if spec == "agent-device:linux":
        platform = Platform.LINUX
        daemon_env = linux_desktop_env(
            display=source.get("DISPLAY", ""),
            dbus_session_bus_address=source.get("DBUS_SESSION_BUS_ADDRESS", ""),
            home=home,
            path=source.get("PATH", "/usr/bin:/bin"),
            xdg_runtime_dir=source.get("XDG_RUNTIME_DIR"),
        )
        claims_dir = state_dir / "claims"
    elif kind in {"ios", "android"} and ident:
        platform = Platform(kind)
        device = {"udid": ident} if kind == "ios" else {"serial": ident}
        daemon_env = {
            k: source[k] for k in ("PATH", "HOME", "ANDROID_HOME", "DEVELOPER_DIR") if k in source
        }
    else:
        raise ConfigError(
            f"{spec!r} is not an agent-device spec; use agent-device:linux, ios:<udid> or "
            "android:<serial>"
        )
    on_close: Callable[[], None] | None = None
    info = read_daemon_info(state_dir)
    if info is None or not _alive(info.pid):
        proc = start_daemon(state_dir, env=daemon_env, claims_dir=claims_dir)
        on_close = proc.stop
    try:
        dev = AgentDeviceDevice.connect(state_dir, platform=platform, device=device)
    except BaseException:
        if on_close is not None:
            on_close()
        raise
    dev._on_close = on_close  # noqa: SLF001 - set by this module's own factory
    return dev


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
