"""A run's status line, without rich or the run models: `goalfleet status` prints it from the
run's JSON (`FleetClient.run_json`), and `_render.run_line` builds rich's from the same words.

`done run 3f2a9c1e on ios-1 (attempt 1)`, the status in its colour on a terminal (as rich
colours it: not with `NO_COLOR` set or on a dumb terminal), plain in a pipe. The device, the
target and the reason are shown `visible` (their control characters as escapes), so nothing a
submitter or an app wrote can style or move an operator's terminal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TextIO

from workers.core.text import visible

STATUS_STYLE = {
    "done": "green",
    "running": "cyan",
    "queued": "dim",
    "cancelled": "yellow",
    "errored": "red",
    "blocked": "magenta",
    "escalated": "magenta",
    "max-steps": "magenta",
    "over-budget": "magenta",
}
"""A `RunStatus` value's colour (a rich style name); the others print uncoloured."""
_SGR = {"green": "32", "cyan": "36", "dim": "2", "yellow": "33", "red": "31", "magenta": "35"}
"""The styles of `STATUS_STYLE` as ANSI SGR codes, as rich writes them."""


def run_tail(run_id: str, where: str | None, attempt: int, reason: str) -> str:
    """What follows the status: ` run <8 of the id> on <where> (attempt N) — <reason>`."""
    tail = f" — {visible(reason)}" if reason else ""
    return f" run {run_id[:8]} on {visible(where or 'pending')} (attempt {attempt}){tail}"


def colours(stream: TextIO) -> bool:
    """Whether a line to `stream` is coloured: a terminal (or `FORCE_COLOR`), not dumb, and
    no `NO_COLOR` (rich's rules, https://no-color.org)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM", "") in {"dumb", "unknown"}:
        return False
    return bool(os.environ.get("FORCE_COLOR")) or stream.isatty()


def status_line(run: Mapping[str, Any], *, colour: bool) -> str:
    """The status line of a run's JSON object (`RunRecord`'s fields)."""
    status = str(run["status"])
    style = _SGR.get(STATUS_STYLE.get(status, ""))
    head = f"\x1b[{style}m{status}\x1b[0m" if colour and style else status
    where = run.get("device") or run.get("target")
    return head + run_tail(str(run["id"]), where, int(run.get("attempt", 0)), run.get("reason", ""))
