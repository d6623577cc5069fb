"""`goalfleet`'s argument parser: argparse's, with its usage errors said the way every other
error of the command is.

- The error first, as `goalfleet <command>: <what is wrong>` (the usage below it), in the words
  of the subcommand typed: a flag it does not know is its own error with its own usage, not
  the top-level `goalfleet [-h] COMMAND`.
- A mistyped flag, command or choice gets the nearest one (`did you mean --platform?`, by
  difflib). Python 3.14's `suggest_on_error` does this for choices; we run on 3.11.
- A flag a subcommand does not know is refused before its required arguments are checked
  (`submit --platfrom ios` says `--platfrom`, not `--goal` missing).

Every parser `add_subparsers` makes is one of these too (argparse builds them with the
parent's class).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    def parse_known_args(  # type: ignore[override]  # argparse's overloads, one of them
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        if not self._subcommands():  # a subcommand's flags are its subcommand's to check
            for flag in _long_flags(given):
                if not self._knows(flag):
                    self._unrecognized(flag)
        parsed, extras = super().parse_known_args(given, namespace or argparse.Namespace())
        if extras:  # what no parser took is the innermost one's error, with its usage
            self._unrecognized(extras[0])
        return parsed, extras

    def _check_value(self, action: argparse.Action, value: Any) -> None:  # noqa: ANN401 - a parsed value
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        near = _nearest(str(value), choices)
        hint = f"did you mean {near[0]}?" if near else f"choose from {', '.join(choices)}"
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}: {hint}")

    def error(self, message: str) -> NoReturn:
        from workers.core.text import visible  # noqa: PLC0415 - only when there is an error

        sys.stderr.write(f"{self.prog}: {visible(message)}\n")
        self.print_usage(sys.stderr)
        self.exit(2)

    def _subcommands(self) -> bool:
        return self._subparsers is not None

    def _options(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings]

    def _knows(self, flag: str) -> bool:
        name = flag.partition("=")[0]
        return name in self._option_string_actions or (
            self.allow_abbrev and any(s.startswith(name) for s in self._options())
        )

    def _unrecognized(self, given: str) -> NoReturn:
        name = given.partition("=")[0]
        near = _nearest(name, self._options())
        hint = f": did you mean {near[0]}?" if near and name.startswith("-") else ""
        self.error(f"unrecognized argument {given}{hint}")


def _nearest(given: str, known: list[str]) -> list[str]:
    """The one of `known` nearest to `given`, if any is near (difflib's ratio >= 0.6)."""
    import difflib  # noqa: PLC0415 - only when there is an error: ~1 ms of every start

    return difflib.get_close_matches(given, known, n=1)


def _long_flags(args: list[str]) -> Iterator[str]:
    """The `--flag`s in `args`, up to a `--` (after it everything is a value)."""
    for arg in args:
        if arg == "--":
            return
        if arg.startswith("--"):
            yield arg
