"""`goalfleet questions` and `goalfleet answer`: what a person sees of an escalated run, and
how they answer it.

    goalfleet questions                                open questions (the screen, the deciders)
    goalfleet answer RUN --target "Continue as ada"    press the candidate of that name
    goalfleet answer RUN --ref e7 | --done | --blocked

The answer is remembered fleet-wide (source: human, as the API token's name) and the run is
queued again; it passes that screen from memory, and so does every later run.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from rich.table import Table

from scheduler.cli._common import EXIT_OK, add_client_command, print_json, run_id_arg
from scheduler.cli._render import plain_console
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from workers.core.records import Question
from workers.core.text import visible


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    add_client_command(sub, "questions", _questions, help=summary("questions"))
    p = add_client_command(sub, "answer", _answer, help=summary("answer"))
    p.add_argument("run", help="the run id (or a unique prefix of 6+ characters)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--target", metavar="NAME", help="the candidate to press, by its name")
    how.add_argument("--ref", metavar="REF", help="the candidate to press, by its ref (e7)")
    how.add_argument("--done", action="store_true", help="the goal is reached on this screen")
    how.add_argument("--blocked", action="store_true", help="the run cannot go on")


def _questions(client: FleetClient, args: argparse.Namespace) -> int:
    open_ = client.questions()
    if args.json:
        print_json([q.model_dump(mode="json") for q in open_])
        return EXIT_OK
    out = plain_console()
    if not open_:
        out.print("no open questions", markup=False)
        return EXIT_OK
    for q in open_:
        out.print(_table(q), markup=False, highlight=False)
    return EXIT_OK


def _table(q: Question) -> Table:
    asked = dt.datetime.fromtimestamp(q.asked_at, tz=dt.UTC).strftime("%H:%M:%S")
    t = Table(
        title=f"run {q.run_id} — {visible(repr(q.goal))}, step {q.step} on "
        f"{visible(q.device or '?')} (asked {asked})",
        title_justify="left",
        caption=f"why: {visible(q.reason)}",
        caption_justify="left",
    )
    for col in ("ref", "kind", "name"):
        t.add_column(col)
    for c in q.screen.candidates:
        t.add_row(visible(c.ref), c.kind.value, visible(c.name))
    for text in q.screen.context:
        t.add_row("", "text", visible(text))
    for a in q.attempts:
        said = "no valid answer"
        if a.decision is not None:
            d = a.decision
            said = (
                "done" if d.done else "blocked" if d.blocked else f"{d.target} ({d.confidence:.2f})"
            )
        t.add_row("", visible(f"{a.decider} said"), visible(f"{said} — {a.escalated or 'used'}"))
    return t


def _answer(client: FleetClient, args: argparse.Namespace) -> int:
    run_id = client.run(run_id_arg(args.run)).id  # the API resolves a prefix
    body: dict[str, object]
    if args.done:
        body = {"done": True}
    elif args.blocked:
        body = {"blocked": True}
    elif args.ref is not None:
        body = {"ref": args.ref}
    else:
        body = {"target": args.target}
    record = client.answer(run_id, body)
    if args.json:
        print_json(record.model_dump(mode="json"))
    else:
        plain_console().print(
            f"run {record.id}: {record.status.value} — {visible(record.reason)}", markup=False
        )
    return EXIT_OK
