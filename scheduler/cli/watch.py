"""`goalfleet watch`: follow a run's step rows (or a batch's progress) live."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    add_client_command,
    print_json,
    run_id_arg,
)
from scheduler.cli._render import live_console, watch_batch, watch_run
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from workers.core.model import RunStatus


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "watch", main, help=summary("watch"))
    p.add_argument("id", help="run id, or a unique prefix of 6+ characters (batch id with --batch)")
    p.add_argument("--batch", action="store_true", help="ID is a batch id: follow its progress")


def main(client: FleetClient, args: argparse.Namespace) -> int:
    out = live_console(json=args.json)
    if args.batch:
        batch, _ = watch_batch(client, args.id, out)
        if args.json:
            print_json(batch.model_dump(mode="json"))
        return EXIT_OK
    run = watch_run(client, client.run(run_id_arg(args.id)).id, out)
    if args.json:
        print_json(run.model_dump(mode="json"))
    return EXIT_OK if run.status is RunStatus.DONE else EXIT_FAILED
