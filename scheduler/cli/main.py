"""The `goalfleet` command: one subcommand per module in `scheduler.cli`.

Exit codes: 0 success; 1 the run (or eval) ended but not as hoped; 2 bad input; 3 something
needed is unavailable (the API, Redis, a device's tools on this host); 130 interrupted.

The command modules (and what they import: pydantic, httpx, redis, rich) load inside `main`,
so a Ctrl-C while they load is the same one line and exit 130 as a Ctrl-C later on.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

EXIT_INTERRUPTED = 130


def commands() -> list[ModuleType]:
    """Each module has `register(subparsers)`, which adds its parser and sets `func`."""
    from scheduler.cli import api as api_command  # noqa: PLC0415 - see the docstring
    from scheduler.cli import cancel as cancel_command  # noqa: PLC0415
    from scheduler.cli import demo as demo_command  # noqa: PLC0415
    from scheduler.cli import devices as devices_command  # noqa: PLC0415
    from scheduler.cli import eval as eval_command  # noqa: PLC0415
    from scheduler.cli import history as history_command  # noqa: PLC0415
    from scheduler.cli import memory as memory_command  # noqa: PLC0415
    from scheduler.cli import questions as questions_command  # noqa: PLC0415
    from scheduler.cli import run as run_command  # noqa: PLC0415
    from scheduler.cli import runs as runs_command  # noqa: PLC0415
    from scheduler.cli import scheduler as scheduler_command  # noqa: PLC0415
    from scheduler.cli import status as status_command  # noqa: PLC0415
    from scheduler.cli import steps as steps_command  # noqa: PLC0415
    from scheduler.cli import submit as submit_command  # noqa: PLC0415
    from scheduler.cli import watch as watch_command  # noqa: PLC0415
    from scheduler.cli import worker as worker_command  # noqa: PLC0415

    return [
        run_command,
        demo_command,
        submit_command,
        status_command,
        runs_command,
        watch_command,
        steps_command,
        cancel_command,
        devices_command,
        eval_command,
        history_command,
        memory_command,
        questions_command,
        api_command,
        worker_command,
        scheduler_command,
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goalfleet",
        description="Goal-driven step loops on mobile devices, across a fleet.",
        epilog="exit codes: 0 ok, 1 the run ended but not done, 2 bad input, "
        "3 unavailable (API, Redis, device tools), 130 interrupted",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in commands():
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(given)
    except KeyboardInterrupt:  # while the commands load, or while argparse reads the flags
        name = next((a for a in given if not a.startswith("-")), "")
        sys.stderr.write(f"goalfleet{' ' + name if name else ''}: interrupted\n")
        return EXIT_INTERRUPTED


def _main(argv: list[str]) -> int:
    from scheduler.cli import _common  # noqa: PLC0415 - see the module's docstring
    from workers.core.errors import GoalfleetError  # noqa: PLC0415

    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        # Ctrl-C: whatever the command held is released by its own `finally`/`with` blocks
        # on the way up; the user sees one line, not a traceback
        _common.error_line(args.command, "interrupted")
        return _common.EXIT_INTERRUPTED
    except GoalfleetError as exc:  # a command that did not report its own
        return _common.report(exc, args.command)
    except BrokenPipeError:  # `goalfleet … | head`: the reader left; nothing more to say
        # (and nothing for Python's exit-time flush of stdout to fail on)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _common.EXIT_FAILED
    return code


if __name__ == "__main__":
    sys.exit(main())
