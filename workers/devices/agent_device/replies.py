"""Reading agent-device's replies at the adapter's edge: an error envelope becomes one of
`workers.core.errors` (like httpx's `map_httpcore_exceptions`: nothing above `agent_device`
sees a daemon code), a settle result an `ActionResult`, a snapshot node a `Node`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from workers.core.errors import (
    STALE_REASONS,
    AppNotInstalledError,
    DeviceError,
    DeviceNotFoundError,
    FatalDeviceError,
    ProtocolError,
    StaleRefError,
    ToolMissingError,
    TransientDeviceError,
    UnauthorizedError,
)
from workers.core.model import ActionResult, Node

__all__ = [
    "SECURE_ROLES",
    "SECURE_TYPES",
    "daemon_ms",
    "map_daemon_error",
    "read_node",
    "read_rect",
    "refs_generation",
    "settle_result",
]

SECURE_ROLES = frozenset({"password text", "securetextfield", "secure-text-field"})
SECURE_TYPES = frozenset({"securetextfield", "secure-text-field", "SecureTextField"})
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


def settle_result(data: Mapping[str, Any], *, where: str) -> ActionResult:
    """A settled press or fill: whether the screen changed, and the refs it added."""
    settle = data.get("settle")
    if not isinstance(settle, dict):
        raise ProtocolError(f"{where}: the reply has no settle result")
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


def read_node(raw: Mapping[str, Any], mask: Callable[[str], str]) -> Node | None:
    """A snapshot node, or None without a ref. A secure field's value is never read; `mask`
    hides typed secrets in the other texts."""
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
    value = "" if secure else mask(str(raw.get("value") or ""))
    label = mask(str(raw.get("label") or ""))
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
        rect=read_rect(raw.get("rect")),
        container=str(raw["parentIndex"]) if isinstance(raw.get("parentIndex"), int) else "",
    )


def read_rect(raw: object) -> tuple[int, int, int, int] | None:
    """`{x, y, width, height}` as the snapshot gives it (AT-SPI extents), or None."""
    if not isinstance(raw, Mapping):
        return None
    try:
        x, y, w, h = (int(raw[k]) for k in ("x", "y", "width", "height"))
    except (KeyError, TypeError, ValueError):
        return None
    return (x, y, w, h) if w > 0 and h > 0 else None


def refs_generation(data: Mapping[str, Any]) -> str | None:
    """The generation a reply's refs belong to (the settle's after an action)."""
    settle = data.get("settle")
    if isinstance(settle, dict) and settle.get("refsGeneration") is not None:
        return str(settle["refsGeneration"])
    gen = data.get("refsGeneration")
    return None if gen is None else str(gen)


def daemon_ms(data: Mapping[str, Any]) -> float | None:
    """The daemon's own wall time for a command, when it reports one."""
    cost = data.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("wallClockMs"), int | float):
        return float(cost["wallClockMs"])
    return None


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
