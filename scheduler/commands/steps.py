"""`goalfleet steps`: a run's step rows so far (`--after N` for the new ones only)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from scheduler.client import FleetClient
from scheduler.commands._common import EXIT_OK, add_client_command, print_json
from scheduler.commands._render import steps_table


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "steps", main, help="print a run's step rows")
    p.add_argument("id")
    p.add_argument("--after", type=int, default=0)


def main(client: FleetClient, args: argparse.Namespace) -> int:
    rows = client.steps(args.id, after=args.after)
    if args.json:
        print_json([r.model_dump(mode="json") for r in rows])
    else:
        Console().print(steps_table(rows, f"run {args.id}"))
    return EXIT_OK
