"""`goalfleet devices`: registered devices with health, load and quarantine."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.client import FleetClient
from scheduler.commands._common import EXIT_OK, add_client_command, print_json
from scheduler.commands._render import devices_table, plain_console


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    add_client_command(sub, "devices", main, help="list the fleet's devices")


def main(client: FleetClient, args: argparse.Namespace) -> int:
    devices = client.devices()
    if args.json:
        print_json([d.model_dump(mode="json") for d in devices])
    else:
        plain_console().print(devices_table(devices))
    return EXIT_OK
