"""`goalfleet history`: what the run history says over a window, read from the history database
(`GOALFLEET_DATABASE_URL`, else the embedded one `goalfleet run` and the demo write), and
`goalfleet db upgrade`: make or bring its tables up to date.

Its first line (and `--json`'s `where` and `store`) names the history read. With a token for
the fleet's API (GOALFLEET_API_URL), it asks the API where the fleet records its history
(`/health`'s `history`) and says when that is another database, or none: a fleet records
history only with GOALFLEET_DATABASE_URL set where its scheduler and API run.

goalfleet history [--since 7d] [--until DATE] [--bucket 1d] [--min-runs 10] [--json]
goalfleet db upgrade
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from scheduler.cli._common import EXIT_OK, client_token, print_json, with_settings
from scheduler.cli._render import plain_console
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from scheduler.store.history.report import (
    HistoryReport,
    history_report,
    parse_since,
    parse_span,
)
from scheduler.store.history.store import SqlHistory
from workers.core.errors import GoalfleetError
from workers.core.prices import shown_cost
from workers.core.text import visible
from workers.settings import Settings

EMBEDDED = "this machine's own: goalfleet run and goalfleet demo write it"
FLEET_WAIT_S = 2.0
"""How long the fleet's API may take to say where its history is (the report does not wait)."""


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("history", help=summary("history"))
    p.add_argument("--since", default="7d", help="a span back (7d, 24h) or a date (default: 7d)")
    p.add_argument("--until", default=None, help="a date or time (default: now)")
    p.add_argument(
        "--bucket", default="1d", help="step-time bucket in whole days: 1d, 7d (default 1d)"
    )
    p.add_argument(
        "--min-runs", type=int, default=10, help="runs a device needs to be judged (default 10)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=with_settings("history")(main))
    db = sub.add_parser("db", help=summary("db"))
    verbs = db.add_subparsers(dest="verb", required=True, metavar="VERB")
    up = verbs.add_parser("upgrade", help="apply the migrations not yet applied")
    up.set_defaults(func=with_settings("db upgrade")(upgrade))


def upgrade(settings: Settings, _args: argparse.Namespace) -> int:
    store = SqlHistory.open(settings.history_url())
    try:
        applied = store.db.upgrade()
    finally:
        store.close()
    done = ", ".join(applied) if applied else "nothing to apply"
    print(f"history database {store.where()}: {done}")  # noqa: T201 - the command's one line
    return EXIT_OK


def main(settings: Settings, args: argparse.Namespace) -> int:
    now = time.time()
    since = parse_since(args.since, now, "--since")
    until = parse_since(args.until, now, "--until") if args.until else now
    bucket_s = parse_span(args.bucket, "--bucket")
    store = SqlHistory.open(settings.history_url(), upgrade=settings.database_url is None)
    try:
        report = history_report(
            store, since=since, until=until, bucket_s=bucket_s, min_runs=args.min_runs
        )
    finally:
        store.close()
    fleet = fleet_history(settings)
    if args.json:
        kind = "GOALFLEET_DATABASE_URL" if settings.database_url else "embedded"
        print_json(report.as_dict() | {"store": kind, "fleet": fleet})
    else:
        kind = "GOALFLEET_DATABASE_URL" if settings.database_url else EMBEDDED
        print_report(report, plain_console(), kind=kind, note=elsewhere(fleet, report.where))
    return EXIT_OK


def fleet_history(settings: Settings) -> dict[str, str | None] | None:
    """`{"api": url, "history": where}`: what the fleet's API (GOALFLEET_API_URL) says of its
    history; None without a token for it, or when it does not answer (the report stands
    alone)."""
    token = client_token(settings)
    if token is None:
        return None
    client = FleetClient(settings.api_url, token=token, timeout_s=FLEET_WAIT_S)
    try:
        health = client.health()
    except GoalfleetError:
        return None
    finally:
        client.close()
    if "history" not in health:  # not a token of this fleet, or an API before the field
        return None
    return {"api": settings.api_url, "history": health["history"]}


def elsewhere(fleet: dict[str, str | None] | None, read: str) -> str | None:
    """The line saying the fleet records its history somewhere else than `read`, or nowhere."""
    if fleet is None or fleet["history"] == read:
        return None
    if fleet["history"] is None:
        return (
            f"the fleet at {fleet['api']} records no history (its API has no "
            "GOALFLEET_DATABASE_URL): its runs are in none"
        )
    return (
        f"the fleet at {fleet['api']} records its history in {fleet['history']}, not here: "
        "set GOALFLEET_DATABASE_URL to it to read that one"
    )


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M")


def print_report(
    report: HistoryReport, console: Console, *, kind: str, note: str | None = None
) -> None:
    """The history read (`kind`: where it comes from) and its window on the first line, `note`
    (the fleet's history is elsewhere) on the second, then the tables."""
    console.print(
        f"history {report.where} ({kind}): {_when(report.since)} to {_when(report.until)} UTC",
        markup=False,
    )
    if note:
        console.print(visible(note), markup=False)  # the API's answer, shown inert
    rates = Table("flow", "device class", "runs", "passed", "flaky", title="pass rates")
    for r in report.pass_rates:
        rates.add_row(
            visible(r.flow),
            r.device_class,
            str(r.runs),
            f"{r.pass_rate:.0%}",
            f"{r.flaky_rate:.0%}",
        )
    console.print(rates)
    times = Table("flow", "phase", "from", "steps", "p50 ms", "p95 ms", title="step times")
    for t in report.step_times:
        times.add_row(
            visible(t.flow), t.phase, _when(t.bucket), str(t.steps), f"{t.p50_ms:.0f}",
            f"{t.p95_ms:.0f}",
        )  # fmt: skip
    console.print(times)
    if report.costs:
        spent = Table("from", "runs", "input tokens", "output tokens", "cost", title="model cost")
        for c in report.costs:
            spent.add_row(
                _when(c.bucket), str(c.runs), str(c.input_tokens), str(c.output_tokens),
                shown_cost(c.cost) or "0",
            )  # fmt: skip
        console.print(spent)
    if not report.outliers:
        console.print("no device fails more than its class", markup=False)
        return
    odd = Table("device", "class", "runs", "failed", "class rate", title="devices that stand out")
    for o in report.outliers:
        odd.add_row(
            o.device, o.device_class, str(o.runs), f"{o.failure_rate:.0%}", f"{o.class_rate:.0%}"
        )
    console.print(odd)
