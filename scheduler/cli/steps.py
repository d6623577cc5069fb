"""`goalfleet steps`: a run's step rows so far (`--after N` for the new ones only)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from scheduler.cli._common import EXIT_OK, add_client_command, print_json, run_id_arg
from scheduler.cli._render import plain_console, steps_table
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from workers.core.model import StepRow


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "steps", main, help=summary("steps"))
    p.add_argument("id", help="run id, or a unique prefix of 6+ characters")
    p.add_argument(
        "--after", type=int, default=0, metavar="N", help="only the steps after step N (default: 0)"
    )
    p.add_argument(
        "--screenshots",
        type=Path,
        metavar="DIR",
        help="save each step's picture as DIR/step-NNN.png (the screen its decider saw)",
    )


def main(client: FleetClient, args: argparse.Namespace) -> int:
    run_id = client.run(run_id_arg(args.id)).id
    rows = client.steps(run_id, after=args.after)
    if args.screenshots is not None:
        _save(client, run_id, rows, args.screenshots)
    if args.json:
        print_json([r.model_dump(mode="json") for r in rows])
    else:
        plain_console().print(steps_table(rows, f"run {run_id}"))
    return EXIT_OK


def _save(client: FleetClient, run_id: str, rows: list[StepRow], out: Path) -> None:
    """Each row's picture into `out`; a row without one says why (stderr: stdout may be JSON)."""
    out.mkdir(parents=True, exist_ok=True)
    err = plain_console(stderr=True)
    saved = 0
    for row in rows:
        if row.screenshot is None:
            why = row.screenshot_note or "no screenshot taken"
            err.print(f"step {row.index}: {why}")
            continue
        (out / f"step-{row.index:03d}.png").write_bytes(client.screenshot(run_id, row.index))
        saved += 1
    err.print(f"saved {saved} screenshot(s) of run {run_id} in {out}")
