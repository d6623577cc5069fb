"""`goalfleet steps`: a run's step rows so far (`--after N` for the new ones only)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from scheduler.commands._common import (
    EXIT_OK,
    add_api_args,
    load_settings,
    make_client,
    print_json,
    report,
)
from scheduler.commands._render import steps_table
from workers.core.errors import GoalfleetError


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("steps", help="print a run's step rows")
    p.add_argument("id")
    p.add_argument("--after", type=int, default=0)
    add_api_args(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        with make_client(load_settings(), args) as client:
            rows = client.steps(args.id, after=args.after)
    except GoalfleetError as exc:
        return report(exc, "steps")
    if args.json:
        print_json([r.model_dump(mode="json") for r in rows])
    else:
        Console().print(steps_table(rows, f"run {args.id}"))
    return EXIT_OK
