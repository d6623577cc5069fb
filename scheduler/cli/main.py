"""The `goalfleet` command: one subcommand per module in `scheduler.cli`.

Exit codes: 0 success; 1 the run (or eval) ended but not as hoped; 2 bad input; 3 something
needed is unavailable (the API, Redis, a device's tools on this host); 130 interrupted.

The command modules (and what they import: pydantic, httpx, redis, rich) load inside `main`,
and only the one typed (`scheduler.cli.commands` lists them all for `--help`), so a command
starts without the others' imports, and a Ctrl-C while it loads is the same one line and
exit 130 as a Ctrl-C later on.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from scheduler.cli._parser import Parser
from scheduler.cli.commands import COMMANDS

EXIT_INTERRUPTED = 130


def commands() -> list[ModuleType]:
    """Every command module (each has `register(subparsers)`, which adds its parsers and sets
    `func`), in `--help`'s order: imports them all."""
    return [_module(name) for name in _modules()]


def _modules() -> list[str]:
    return list(dict.fromkeys(module for module, _ in COMMANDS.values()))


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"scheduler.cli.{name}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser: every command's, each module imported. Given `command` (the word
    typed after `goalfleet`), only that command's module is imported and registered; every
    other command is its name and help alone (all `goalfleet --help` lists), so a command
    starts without importing what the others use."""
    parser = Parser(
        prog="goalfleet",
        description="Goal-driven step loops on mobile devices, across a fleet.",
        epilog="exit codes: 0 ok, 1 the run ended but not done, 2 bad input, "
        "3 unavailable (API, Redis, device tools), 130 interrupted",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = COMMANDS[command][0] if command in COMMANDS else None
    for module in _modules():
        if command is None or module == wanted:
            _module(module).register(sub)
            continue
        for name, (owner, help_line) in COMMANDS.items():
            if owner == module:
                sub.add_parser(name, help=help_line)
    return parser


def console_main() -> int:
    """The program (the `goalfleet` console script, `python -m scheduler`): `main` on
    `sys.argv`, then the exit. Tests call `main`, in their own process.

    Python's shutdown walks every object the garbage collector tracks (pydantic's schemas
    and validators, most of what the imports made) to find the cycles among them: ~16 ms of
    `goalfleet status`'s ~145 (bench/bench_cli_start.py). Frozen (`gc.freeze`), they are
    skipped: the exit frees their memory. What an exit promises still happens: the atexit
    handlers (logging's shutdown, `weakref.finalize`), the flush of stdout and stderr; an
    object left in a cycle is not finalized, which Python does not promise at exit either."""
    code = main()
    gc.freeze()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    # httpx imports its own command line (`httpx._main`: click, pygments, rich.progress; 60-70
    # ms of a start, bench/bench_cli_start.py measured when the client was on httpx) unless
    # that import fails, and then defines a stub `httpx.main`. No goalfleet command uses it;
    # the commands that import httpx (the API's webhooks, the agent-device wire, the model
    # decider) start without it. The client commands import no httpx at all.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    try:
        return _main(given)
    except KeyboardInterrupt:  # while the commands load, or while argparse reads the flags
        name = next((a for a in given if not a.startswith("-")), "")
        sys.stderr.write(f"goalfleet{' ' + name if name else ''}: interrupted\n")
        return EXIT_INTERRUPTED


def _main(argv: list[str]) -> int:
    typed = next((a for a in argv if not a.startswith("-")), "")
    args = build_parser(typed).parse_args(argv)  # `--help` exits here, with nothing imported
    from scheduler.cli import _common  # noqa: PLC0415 - see the module's docstring
    from workers.core.errors import GoalfleetError  # noqa: PLC0415

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
    sys.exit(console_main())
