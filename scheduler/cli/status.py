"""`goalfleet status`: one run (or a batch) as it is now.

A run's status is its JSON as the API answered it (`--json`), or its status line (`_line`);
only an ended run's step table loads rich and the run models (`_render.result_table`), so a
run still queued or running answers with neither imported (bench/bench_cli_start.py). A run
still pending also says why it waits: each device it can go to, quarantined (and why), down,
or busy (`routing.waiting_for`, from `GET /v1/devices`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from scheduler.cli._common import EXIT_OK, add_client_command, print_json, run_id_arg
from scheduler.cli._line import colours, status_line
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from workers.core.text import visible


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "status", main, help=summary("status"))
    p.add_argument("id", help="run id, or a unique prefix of 6+ characters (batch id with --batch)")
    p.add_argument("--batch", action="store_true", help="ID is a batch id: its runs, one a line")


def main(client: FleetClient, args: argparse.Namespace) -> int:
    if args.batch:
        return _batch(client, args)
    run = client.run_json(run_id_arg(args.id))
    if args.json:
        print_json(run)
        return EXIT_OK
    sys.stdout.write(status_line(run, colour=colours(sys.stdout)) + "\n")
    if run.get("status") == "queued" and not run.get("device"):
        why = _waiting(client, run)
        if why:
            sys.stdout.write(f"  why it waits: {visible(why)}\n")
    if run.get("result") is not None:
        from scheduler.cli._render import plain_console, result_table  # noqa: PLC0415 - rich
        from workers.core.records import RunRecord  # noqa: PLC0415

        record = RunRecord.model_validate(run)
        if record.result is not None:
            plain_console().print(result_table(record.result, record))
        if record.result is not None and record.result.failure is not None:
            from scheduler.suites.failure import failure_lines, next_command  # noqa: PLC0415

            for line in failure_lines(record.result.failure, next_command(record)):
                sys.stdout.write(visible(line) + "\n")
    return EXIT_OK


def _waiting(client: FleetClient, run: dict[str, Any]) -> str:
    """Why a queued run waits: the state of each device it can go to (`routing.waiting_for`),
    "" when one is free (it is about to be placed)."""
    from scheduler.dispatch.routing import waiting_for  # noqa: PLC0415 - queued runs only
    from workers.core.records import Selector  # noqa: PLC0415

    selector = run.get("selector")
    sel = Selector.model_validate(selector) if selector else None
    why = waiting_for(client.devices(), run.get("target"), sel)
    bound = (run.get("request") or {}).get("device_wait_s")
    if why and bound:
        why += f" (it ends unplaceable after {bound:g} s of none up: device_wait_s)"
    return why


def _batch(client: FleetClient, args: argparse.Namespace) -> int:
    from scheduler.cli._render import plain_console, run_line  # noqa: PLC0415 - rich

    batch = client.batch(args.id)
    if args.json:
        print_json(batch.model_dump(mode="json"))
        return EXIT_OK
    out = plain_console()
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(batch.counts.items()))
    out.print(f"batch {batch.id}: {batch.finished}/{batch.total} finished ({counts})")
    for run in client.batch_runs(args.id):
        out.print(run_line(run))
    return EXIT_OK
