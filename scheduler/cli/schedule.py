"""`goalfleet schedule add FILE --every 1h | --cron '0 * * * *'`, `schedule list`, `schedule
remove ID`: a flows file's suite run again and again by the scheduler (`/v1/schedules`).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from scheduler.cli._common import EXIT_OK, add_api_args, print_json, with_client
from scheduler.cli._render import inert, plain_console
from scheduler.cli.commands import summary
from scheduler.cli.suite import read
from scheduler.client.api_client import FleetClient
from workers.core.errors import ConfigError

_EVERY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("schedule", help=summary("schedule"))
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    a = verbs.add_parser("add", help="schedule a flows file's suite")
    a.add_argument("file", type=Path)
    when = a.add_mutually_exclusive_group(required=True)
    when.add_argument("--every", help="how often: 30m, 1h, 1d (or seconds)")
    when.add_argument("--cron", help="five cron fields, UTC: '0 * * * *' is every hour")
    a.add_argument("--name", default=None, help="the schedule's name (default: the suite's)")
    a.add_argument("--only", action="append", default=[], metavar="NAME", help="just this flow")
    add_api_args(a)
    a.set_defaults(func=with_client("schedule add")(add))
    ls = verbs.add_parser("list", help="the schedules")
    add_api_args(ls)
    ls.set_defaults(func=with_client("schedule list")(list_))
    rm = verbs.add_parser("remove", help="stop a schedule")
    rm.add_argument("id")
    add_api_args(rm)
    rm.set_defaults(func=with_client("schedule remove")(remove))


def every_s(value: str) -> float:
    if m := _EVERY.fullmatch(value.strip()):
        return float(m.group(1)) * _UNIT[m.group(2)]
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"--every {value!r}: give a period (30m, 1h, 1d) or seconds") from None


def add(client: FleetClient, args: argparse.Namespace) -> int:
    flows = read(args.file, args.only)
    body: dict[str, Any] = {**flows.body, "name": args.name or flows.suite}
    if args.every is not None:
        body["every_s"] = every_s(args.every)
    else:
        body["cron"] = args.cron
    sched = client.add_schedule(body)
    if args.json:
        print_json(sched)
    else:
        nxt = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(sched["next_at"])))
        sys.stdout.write(f"schedule {sched['id']}: {sched['name']}, next at {nxt}\n")
    return EXIT_OK


def list_(client: FleetClient, args: argparse.Namespace) -> int:
    schedules = client.schedules()
    if args.json:
        print_json(schedules)
        return EXIT_OK
    table = Table(show_header=True, box=None)
    for col in ("schedule", "name", "when", "next", "last batch"):
        table.add_column(col)
    for s in schedules:
        when = f"cron {s['cron']}" if s.get("cron") else f"every {s['every_s']:g} s"
        nxt = s.get("next_at")
        table.add_row(
            s["id"],
            inert(s["name"]),
            inert(when),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(nxt)) if nxt else "-",
            (s.get("last_batch") or "-")[:8],
        )
    plain_console().print(table)
    return EXIT_OK


def remove(client: FleetClient, args: argparse.Namespace) -> int:
    client.remove_schedule(args.id)
    sys.stdout.write(f"schedule {args.id} removed\n")
    return EXIT_OK
