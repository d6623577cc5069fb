"""`goalfleet memory`: what the fleet remembers of decisions, and forgetting it.

goalfleet memory list [--goal "Sign in"]      entries, most used first
goalfleet memory show KEY                     one entry (a unique prefix of 6+ will do)
goalfleet memory forget KEY | --goal G | --all
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from rich.table import Table

from scheduler.cli._common import EXIT_OK, add_api_args, print_json, with_client
from scheduler.cli._render import plain_console
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from workers.core.errors import ConfigError
from workers.core.memory import Remembered
from workers.core.text import visible

MIN_PREFIX = 6


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("memory", help=summary("memory"))
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    ls = verbs.add_parser("list", help="entries, most used first")
    ls.add_argument("--goal", default=None, help="only this goal's entries")
    show = verbs.add_parser("show", help="one entry")
    show.add_argument("key", help="an entry's key (or a unique prefix of 6+ characters)")
    forget = verbs.add_parser("forget", help="forget one entry, a goal's entries, or all")
    forget.add_argument("key", nargs="?", default=None)
    forget.add_argument("--goal", default=None, help="forget every entry of this goal")
    forget.add_argument("--all", action="store_true", help="forget every entry")
    for name, verb in (("list", ls), ("show", show), ("forget", forget)):
        add_api_args(verb)
        verb.set_defaults(func=with_client(f"memory {name}")(_VERBS[name]))


def _list(client: FleetClient, args: argparse.Namespace) -> int:
    entries = client.memory(goal=args.goal)
    if args.json:
        print_json([e.model_dump(mode="json") for e in entries])
        return EXIT_OK
    table = Table(title=f"decision memory ({len(entries)} entries)", title_justify="left")
    for col in ("key", "goal", "screen", "decision", "source", "hits", "last used"):
        table.add_column(col, justify="right" if col == "hits" else "left")
    for e in entries:
        table.add_row(
            e.key[:12],
            visible(e.goal),
            visible(e.screen),
            visible(_decision(e)),
            visible(f"{e.source} ({e.origin})" if e.origin else e.source),
            str(e.hits),
            _when(e.last_used_at),
        )
    plain_console().print(table, markup=False, highlight=False)
    return EXIT_OK


def _show(client: FleetClient, args: argparse.Namespace) -> int:
    entry = client.memory_entry(_full_key(client, args.key))
    if args.json:
        print_json(entry.model_dump(mode="json"))
        return EXIT_OK
    out = plain_console()
    for label, value in (
        ("key", entry.key),
        ("goal", entry.goal),
        ("screen", entry.screen),
        ("decision", _decision(entry)),
        ("source", entry.source),
        ("origin", entry.origin),
        ("hits", str(entry.hits)),
        ("created", _when(entry.created_at)),
        ("last used", _when(entry.last_used_at)),
    ):
        out.print(f"{label:>10}  {visible(value)}", markup=False, highlight=False)
    return EXIT_OK


def _forget(client: FleetClient, args: argparse.Namespace) -> int:
    chosen = sum(x is not None and x is not False for x in (args.key, args.goal, args.all or None))
    if chosen != 1:
        raise ConfigError("memory forget: give exactly one of KEY, --goal GOAL or --all")
    if args.key is not None:
        key = _full_key(client, args.key)
        client.forget(key)
        n = 1
    else:
        n = client.forget_many(goal=args.goal)
    if args.json:
        print_json({"forgotten": n})
    else:
        plain_console().print(f"forgot {n} entr{'y' if n == 1 else 'ies'}", markup=False)
    return EXIT_OK


def _full_key(client: FleetClient, given: str) -> str:
    if len(given) == 32:  # noqa: PLR2004 - a whole key
        return given
    if len(given) < MIN_PREFIX:
        raise ConfigError(f"memory key {given!r}: give at least {MIN_PREFIX} characters")
    matches = [e.key for e in client.memory() if e.key.startswith(given)]
    if not matches:
        raise ConfigError(f"no memory entry starts with {given!r}; see `goalfleet memory list`")
    if len(matches) > 1:
        raise ConfigError(f"memory key {given!r} is ambiguous: {', '.join(matches[:5])}")
    return matches[0]


def _decision(e: Remembered) -> str:
    if e.done:
        return "done"
    if e.target is None:
        return "?"
    text = f"{e.target.kind.value} {e.target.name!r}" + (
        f" #{e.target.ordinal}" if e.target.ordinal else ""
    )
    return text + (f" ← {e.input}" if e.input else "")


def _when(ts: float) -> str:
    if not ts:
        return ""
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


_VERBS = {"list": _list, "show": _show, "forget": _forget}
