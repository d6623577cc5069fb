"""`goalfleet steps`: a run's step rows so far (`--after N` for the new ones only)."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.cli._common import EXIT_OK, add_client_command, print_json, run_id_arg
from scheduler.cli._render import plain_console, steps_table
from scheduler.client.api_client import FleetClient


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "steps", main, help="print a run's step rows")
    p.add_argument("id", help="run id, or a unique prefix of 6+ characters")
    p.add_argument(
        "--after", type=int, default=0, metavar="N", help="only the steps after step N (default: 0)"
    )


def main(client: FleetClient, args: argparse.Namespace) -> int:
    run_id = client.run(run_id_arg(args.id)).id
    rows = client.steps(run_id, after=args.after)
    if args.json:
        print_json([r.model_dump(mode="json") for r in rows])
    else:
        plain_console().print(steps_table(rows, f"run {run_id}"))
    return EXIT_OK
