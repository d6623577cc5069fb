"""`goalfleet cancel`: cancel a run (queued: at once; running: between two steps)."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.cli._common import EXIT_OK, add_client_command, print_json, run_id_arg
from scheduler.cli._render import plain_console, run_line
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "cancel", main, help=summary("cancel"))
    p.add_argument("id", help="run id, or a unique prefix of 6+ characters")


def main(client: FleetClient, args: argparse.Namespace) -> int:
    run = client.cancel(run_id_arg(args.id))
    if args.json:
        print_json(run.model_dump(mode="json"))
    else:
        note = "" if run.status.terminal else " (cancel requested; it stops before its next step)"
        plain_console().print(run_line(run) + note)
    return EXIT_OK
