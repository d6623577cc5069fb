"""The `goalfleet` command: one subcommand per module in `scheduler.commands`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scheduler.commands import run as run_command

COMMANDS = [run_command]
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
