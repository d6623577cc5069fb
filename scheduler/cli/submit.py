"""`goalfleet submit`: submit a run (to a device or a selector) or a batch."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from scheduler.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    add_client_command,
    add_goal_input_flags,
    pairs,
    plain_fields,
    print_json,
)
from scheduler.cli._params import add_run_param_flags, run_params_from
from scheduler.cli._render import live_console, watch_batch, watch_run
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from workers.core.errors import ConfigError
from workers.core.model import RunStatus


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "submit", main, help=summary("submit"))
    p.add_argument("--goal", required=True, help='what to achieve, e.g. "Sign in"')
    where = p.add_argument_group("where (default: any device)")
    where.add_argument("--device", default=None, help="one exact device id")
    where.add_argument("--platform", default=None, help="selector: ios | android | linux")
    where.add_argument("--os-version", default=None, help="selector: exact, or a prefix like 17.*")
    where.add_argument(
        "--label", action="append", default=[], metavar="K=V", help="selector: a label (repeatable)"
    )
    add_goal_input_flags(
        p, ref_help="resolved on the worker from GOALFLEET_SECRET_VAR (never sent)"
    )
    add_run_param_flags(p, server_defaults=True)
    p.add_argument("--priority", type=int, default=0, help="0 (highest) to 9 (default: 0)")
    p.add_argument(
        "--device-wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="end the run unplaceable if every device it can go to stays down or quarantined "
        "this long (default: wait until one returns)",
    )
    p.add_argument("--batch", action="store_true", help="one run on every matching device")
    p.add_argument(
        "--count",
        type=int,
        default=None,
        help="with --batch: N runs instead (default: one a device)",
    )
    p.add_argument(
        "--idempotency-key",
        default=None,
        help="the same key again returns the first submit's run, never a second one",
    )
    p.add_argument("--watch", action="store_true", help="follow it live until it ends")


def body_from(args: argparse.Namespace) -> dict[str, Any]:
    secrets: dict[str, dict[str, Any]] = {}
    for name, ref in pairs(args.secret, "--secret").items():
        if not ref.startswith("env:"):
            raise ConfigError(f"--secret {name}: give a reference like {name}=env:VAR, not a value")
        secrets[name] = {"ref": ref}
    for name in plain_fields(args, secrets):
        secrets[name]["plain_field"] = True
    body: dict[str, Any] = {
        "goal": args.goal,
        "inputs": pairs(args.input, "--input"),
        "secrets": secrets,
        "decider": args.decider,
        "priority": args.priority,
    }
    if args.device_wait is not None:
        body["device_wait_s"] = args.device_wait
    body.update(run_params_from(args).model_dump(exclude_unset=True))
    selector = _selector(args)
    if args.batch:
        body["selector"] = selector
        if args.count is not None:
            body["count"] = args.count
    elif args.device:
        if selector:
            raise ConfigError("give --device or selector flags (--platform ...), not both")
        body["device"] = args.device
    elif selector:
        body["selector"] = selector
    return body


def _selector(args: argparse.Namespace) -> dict[str, Any]:
    selector: dict[str, Any] = {}
    if args.platform:
        selector["platform"] = args.platform
    if args.os_version:
        selector["os_version"] = args.os_version
    if args.label:
        selector["labels"] = pairs(args.label, "--label")
    return selector


def main(client: FleetClient, args: argparse.Namespace) -> int:
    out = live_console(json=args.json)
    body = body_from(args)
    if args.batch:
        batch = client.submit_batch(body, idempotency_key=args.idempotency_key)
        if args.watch:
            batch, _ = watch_batch(client, batch.id, out)
        if args.json:
            print_json(batch.model_dump(mode="json"))
        else:
            sys.stdout.write(f"{batch.id}\n")
        return EXIT_OK
    run = client.submit_run(body, idempotency_key=args.idempotency_key)
    if args.watch:
        run = watch_run(client, run.id, out)
    if args.json:
        print_json(run.model_dump(mode="json"))
    else:
        sys.stdout.write(f"{run.id}\n")
    failed = args.watch and run.status is not RunStatus.DONE
    return EXIT_FAILED if failed else EXIT_OK
