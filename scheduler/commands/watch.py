"""`goalfleet watch`: follow a run's step rows (or a batch's progress) live."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from scheduler.commands._common import (
    EXIT_FAILED,
    EXIT_OK,
    add_api_args,
    load_settings,
    make_client,
    print_json,
    report,
)
from scheduler.commands._render import watch_batch, watch_run
from workers.core.errors import GoalfleetError
from workers.core.model import RunStatus


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("watch", help="follow a run (or --batch ID) live until it ends")
    p.add_argument("id")
    p.add_argument("--batch", action="store_true")
    add_api_args(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    out = Console()
    try:
        with make_client(load_settings(), args) as client:
            if args.batch:
                batch, _ = watch_batch(client, args.id, out)
                if args.json:
                    print_json(batch.model_dump(mode="json"))
                return EXIT_OK
            run = watch_run(client, args.id, out)
            if args.json:
                print_json(run.model_dump(mode="json"))
            return EXIT_OK if run.status is RunStatus.DONE else EXIT_FAILED
    except GoalfleetError as exc:
        return report(exc, "watch")
