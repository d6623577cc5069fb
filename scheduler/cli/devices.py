"""`goalfleet devices`: registered devices with health, load and quarantine.

`--wait SECONDS` first waits until the API answers and a live device is registered (with
`--device ID`, repeatable: until each of those is), so a script can start the API and workers
and submit without guessing a sleep:

    goalfleet worker --device ios-1 --platform ios &
    goalfleet devices --wait 60 --device ios-1
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from scheduler.cli._common import EXIT_OK, add_client_command, print_json
from scheduler.cli._render import devices_table, plain_console
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from scheduler.errors import UnavailableError
from workers.core.errors import ConfigError
from workers.core.records import DeviceState

WAIT_POLL_S = 0.25


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "devices", main, help=summary("devices"))
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS for the API and a live device (or each --device) to "
        "register; exit 3 if none has (default: 0, list at once)",
    )
    p.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="ID",
        help="with --wait: wait for this device (repeatable; default: any one)",
    )


def _missing(devices: list[DeviceState], wanted: list[str]) -> list[str]:
    """What `--wait` still waits for: the wanted ids not registered and alive, or (none
    wanted) a sign that no device is."""
    alive = {d.info.id for d in devices if d.alive}
    if wanted:
        return [w for w in wanted if w not in alive]
    return [] if alive else ["any device"]


def wait_devices(client: FleetClient, wait_s: float, wanted: list[str]) -> list[DeviceState]:
    """The device list once `wanted` (or any device) is registered and alive; an
    `UnavailableError` naming what is missing after `wait_s`. An API still starting is waited
    for within the same `wait_s` (or the client's own wait, if longer)."""
    deadline = time.monotonic() + wait_s
    own_wait = client.connect_wait_s
    while True:
        client.connect_wait_s = max(own_wait, deadline - time.monotonic())
        devices = client.devices()
        missing = _missing(devices, wanted)
        if not missing:
            return devices
        if time.monotonic() >= deadline:
            what = ", ".join(missing)
            raise UnavailableError(
                f"waited {wait_s:g} s: {what} not registered; is its `goalfleet worker` running "
                "on the same Redis and key prefix?"
            )
        time.sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))


def main(client: FleetClient, args: argparse.Namespace) -> int:
    if args.wait < 0:
        raise ConfigError("--wait must be 0 or more seconds")
    if args.device and not args.wait:
        raise ConfigError("--device goes with --wait SECONDS (which devices to wait for)")
    devices = wait_devices(client, args.wait, args.device) if args.wait else client.devices()
    if args.json:
        print_json([d.model_dump(mode="json") for d in devices])
    else:
        plain_console().print(devices_table(devices))
    return EXIT_OK
