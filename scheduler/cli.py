"""The `goalfleet` command: one subcommand per module in `scheduler.commands`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scheduler.commands import api as api_command
from scheduler.commands import cancel as cancel_command
from scheduler.commands import demo as demo_command
from scheduler.commands import devices as devices_command
from scheduler.commands import eval as eval_command
from scheduler.commands import memory as memory_command
from scheduler.commands import questions as questions_command
from scheduler.commands import run as run_command
from scheduler.commands import scheduler as scheduler_command
from scheduler.commands import status as status_command
from scheduler.commands import steps as steps_command
from scheduler.commands import submit as submit_command
from scheduler.commands import watch as watch_command
from scheduler.commands import worker as worker_command

COMMANDS = [
    run_command,
    demo_command,
    submit_command,
    status_command,
    watch_command,
    steps_command,
    cancel_command,
    devices_command,
    eval_command,
    memory_command,
    questions_command,
    api_command,
    worker_command,
    scheduler_command,
]
"""Each module has `register(subparsers)`, which adds its parser and sets `func`."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goalfleet", description="Goal-driven step loops on mobile devices, across a fleet."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
