"""`goalfleet status`: one run (or a batch) as it is now."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.cli._common import EXIT_OK, add_client_command, print_json, run_id_arg
from scheduler.cli._render import plain_console, result_table, run_line
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "status", main, help=summary("status"))
    p.add_argument("id", help="run id, or a unique prefix of 6+ characters (batch id with --batch)")
    p.add_argument("--batch", action="store_true", help="ID is a batch id: its runs, one a line")


def main(client: FleetClient, args: argparse.Namespace) -> int:
    out = plain_console()
    if args.batch:
        batch = client.batch(args.id)
        if args.json:
            print_json(batch.model_dump(mode="json"))
            return EXIT_OK
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(batch.counts.items()))
        out.print(f"batch {batch.id}: {batch.finished}/{batch.total} finished ({counts})")
        for run in client.batch_runs(args.id):
            out.print(run_line(run))
        return EXIT_OK
    run = client.run(run_id_arg(args.id))
    if args.json:
        print_json(run.model_dump(mode="json"))
        return EXIT_OK
    out.print(run_line(run))
    if run.result is not None:
        out.print(result_table(run.result, run))
    return EXIT_OK
