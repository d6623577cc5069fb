"""`goalfleet devices`: registered devices with health, load and quarantine."""

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
from scheduler.commands._render import devices_table
from workers.core.errors import GoalfleetError


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("devices", help="list the fleet's devices")
    add_api_args(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        with make_client(load_settings(), args) as client:
            devices = client.devices()
    except GoalfleetError as exc:
        return report(exc, "devices")
    if args.json:
        print_json([d.model_dump(mode="json") for d in devices])
    else:
        Console().print(devices_table(devices))
    return EXIT_OK
