"""`goalfleet scheduler`: the dispatcher loop (pending runs → idle devices) and recurring
schedules. Run one or more per fleet; they coordinate through Redis."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from scheduler.cli._common import (
    EXIT_OK,
    add_log_args,
    check_stores,
    shown_store,
    start_line,
    with_settings,
)
from scheduler.cli.commands import summary
from scheduler.service.graph import run_scheduler
from workers.settings import Settings
from workers.telemetry.logs import configure_logging


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("scheduler", help=summary("scheduler"))
    add_log_args(p)
    p.set_defaults(func=main)


@with_settings("scheduler")
def main(settings: Settings, args: argparse.Namespace) -> int:
    configure_logging(level=args.loglevel, fmt=args.log_format or settings.log_format)
    check_stores(settings)  # cannot connect at start: one line, exit 3
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    start_line(
        "scheduler",
        f"dispatching runs from {shown_store(settings)} "
        f"(key prefix {settings.key_prefix}) every {settings.dispatch_interval_s:g} s",
    )
    run_scheduler(settings, stop)
    return EXIT_OK
