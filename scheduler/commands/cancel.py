"""`goalfleet cancel`: cancel a run (queued: at once; running: between two steps)."""

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
from scheduler.commands._render import run_line
from workers.core.errors import GoalfleetError


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("cancel", help="cancel a run")
    p.add_argument("id")
    add_api_args(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        with make_client(load_settings(), args) as client:
            run = client.cancel(args.id)
    except GoalfleetError as exc:
        return report(exc, "cancel")
    if args.json:
        print_json(run.model_dump(mode="json"))
    else:
        note = "" if run.status.terminal else " (cancel requested; it stops before its next step)"
        Console().print(run_line(run) + note)
    return EXIT_OK
