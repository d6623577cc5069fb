"""`goalfleet report BATCH --junit FILE --html FILE`: a batch's runs as JUnit XML (one testcase
per flow x device, flaky in Surefire's form) and one self-contained HTML file, with each step's
picture written beside them (`--pictures DIR`, default `<report's dir>/goalfleet-pictures`).

Exit 0 when every case passed (flaky too with `--allow-flaky`), else 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from scheduler.cli._common import EXIT_FAILED, EXIT_OK, add_client_command, print_json
from scheduler.cli.commands import summary
from scheduler.client.api_client import FleetClient
from scheduler.suites.html import to_html
from scheduler.suites.junit import to_xml, write_pictures
from scheduler.suites.outcome import Report, collect
from workers.core.errors import ConfigError
from workers.core.prices import shown_cost


def add_report_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--junit", type=Path, default=None, help="write JUnit XML here")
    p.add_argument("--html", type=Path, default=None, help="write the HTML report here")
    p.add_argument(
        "--pictures",
        type=Path,
        default=None,
        help="write each step's picture here (default: goalfleet-pictures beside the report)",
    )
    p.add_argument(
        "--allow-flaky",
        action="store_true",
        help="a flow that passed only on a retry passes (default: it fails the exit code)",
    )


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = add_client_command(sub, "report", main, help=summary("report"))
    p.add_argument("batch", help="the batch id (6+ characters of it)")
    add_report_flags(p)


def _rel(target: Path, report: Path) -> str:
    return Path(os.path.relpath(target, report.parent)).as_posix()


def write_reports(report: Report, args: argparse.Namespace) -> None:
    """The reports `--junit` and `--html` name, and the pictures beside them."""
    given = [p for p in (args.junit, args.html) if p is not None]
    if not given:
        return
    pictures: Path = args.pictures or given[0].parent / "goalfleet-pictures"
    write_pictures(report, pictures)
    if args.junit is not None:
        args.junit.parent.mkdir(parents=True, exist_ok=True)
        args.junit.write_bytes(to_xml(report, attachments=_rel(pictures, args.junit)))
    if args.html is not None:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(to_html(report, attachments=_rel(pictures, args.html)))


def verdict_lines(report: Report, *, allow_flaky: bool) -> int:
    """One line per case on stderr, a summary, and the exit code CI reads."""
    for c in report.cases:
        retried = f" after {len(c.attempts)} attempts" if len(c.attempts) > 1 else ""
        why = f": {c.last.run.reason}" if c.verdict not in {"passed", "flaky"} else ""
        sys.stderr.write(f"{c.verdict:<10} {c.flow} on {c.device}{retried}{why}\n")
    failed = report.failed(allow_flaky=allow_flaky)
    counts = ", ".join(
        f"{report.count(v)} {v}"
        for v in ("passed", "flaky", "failed", "errored", "cancelled", "incomplete")
        if report.count(v)
    )
    cost = f"; cost {shown_cost(report.cost)}" if report.cost > 0 else ""
    sys.stderr.write(f"suite {report.title}: {counts}{cost}\n")
    return EXIT_FAILED if failed else EXIT_OK


def as_json(report: Report) -> dict[str, object]:
    """The cases and their verdicts (`--json`)."""
    return {
        "batch": report.batch.id,
        "suite": report.batch.suite,
        "cost": report.cost,
        "cases": [
            {"flow": c.flow, "device": c.device, "platform": c.platform, "verdict": c.verdict,
             "attempts": [{"run": a.run.id, "status": a.status.value} for a in c.attempts]}
            for c in report.cases
        ],
    }  # fmt: skip


def main(client: FleetClient, args: argparse.Namespace) -> int:
    if len(args.batch) < 6:  # noqa: PLR2004 - the API's shortest prefix
        raise ConfigError(f"batch id {args.batch!r}: give at least 6 characters of it")
    report = collect(client, args.batch, pictures=args.junit is not None or args.html is not None)
    write_reports(report, args)
    if args.json:
        print_json(as_json(report))
    return verdict_lines(report, allow_flaky=args.allow_flaky)
