"""`goalfleet runs`: the fleet's runs, newest first, filtered (`GET /v1/runs`).

goalfleet runs --status blocked --since 1h
goalfleet runs --batch a9367b4e --json
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from rich.table import Table

from scheduler.cli._common import EXIT_OK, add_client_command, print_json
from scheduler.cli._line import STATUS_STYLE
from scheduler.cli._render import inert, plain_console
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from workers.core.errors import ConfigError
from workers.core.model import RunStatus
from workers.core.prices import shown_cost
from workers.core.records import RunRecord

_AGO = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SHOWN = 10_000


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "runs", main, help=summary("runs"))
    statuses = ", ".join(s.value for s in RunStatus)
    p.add_argument("--status", default=None, help=f"only runs in this status ({statuses})")
    p.add_argument("--device", default=None, help="only runs dispatched to this device")
    p.add_argument("--batch", default=None, help="only this batch's runs (6+ characters of it)")
    p.add_argument("--schedule", default=None, help="only runs this schedule submitted")
    p.add_argument("--suite", default=None, help="only runs of this suite (a flows file's)")
    p.add_argument("--flow", default=None, help="only attempts of this suite flow")
    p.add_argument("--goal", default=None, help="only runs whose goal contains these words")
    p.add_argument("--since", default=None, help="submitted since: 30m, 1h, 2d, or epoch seconds")
    p.add_argument("--until", default=None, help="submitted before: 30m, 1h, 2d, or epoch s")
    p.add_argument(
        "--limit", type=int, default=50, help=f"show at most N runs (1-{MAX_SHOWN}, default 50)"
    )


def when(value: str | None, flag: str, now: float) -> float | None:
    """`1h` (that long ago) or epoch seconds; ConfigError naming the flag otherwise."""
    if value is None:
        return None
    if m := _AGO.fullmatch(value.strip()):
        return now - float(m.group(1)) * _UNIT[m.group(2)]
    try:
        return float(value)
    except ValueError:
        raise ConfigError(
            f"{flag} {value!r}: give a duration ago (30m, 1h, 2d) or epoch seconds"
        ) from None


def main(client: FleetClient, args: argparse.Namespace) -> int:
    if args.status is not None and args.status not in {s.value for s in RunStatus}:
        raise ConfigError(
            f"--status {args.status!r}: one of {', '.join(s.value for s in RunStatus)}"
        )
    if not 1 <= args.limit <= MAX_SHOWN:
        raise ConfigError(f"--limit must be between 1 and {MAX_SHOWN}")
    now = time.time()
    filters = {
        "status": args.status,
        "device": args.device,
        "batch": args.batch,
        "schedule": args.schedule,
        "suite": args.suite,
        "flow": args.flow,
        "goal": args.goal,
        "since": when(args.since, "--since", now),
        "until": when(args.until, "--until", now),
    }
    runs: list[RunRecord] = []
    cursor: str | None = None
    while len(runs) < args.limit:
        page, cursor = client.runs(**filters, limit=min(200, args.limit - len(runs)), cursor=cursor)
        runs += page
        if cursor is None:
            break
    if args.json:
        print_json([r.model_dump(mode="json") for r in runs])
        return EXIT_OK
    table = Table(show_header=True, box=None)
    for col in ("run", "submitted", "device", "status", "goal", "cost", "reason"):
        table.add_column(col, justify="right" if col == "cost" else "left")
    for r in runs:
        style = STATUS_STYLE.get(r.status, "")
        table.add_row(
            r.id[:8],
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.submitted_at)),
            inert(r.device or "-"),
            f"[{style}]{r.status.value}[/]",
            inert(r.request.goal[:40]),
            shown_cost(r.result.totals.cost if r.result is not None else 0.0),
            inert(r.reason[:60]),
        )
    plain_console().print(table)
    return EXIT_OK
