"""`goalfleet suite validate FILE`, `goalfleet suite import MAESTRO.yaml` (a Maestro flow as a
flows file: `scheduler.suites.maestro`) and `goalfleet suite run FILE [--only NAME] [--wait]`: a
flows file (docs/suites.md) checked against its schema, every problem with its line; then
submitted as one batch for the whole matrix. With `--wait`, the reports (`--junit`, `--html`)
and an exit code that fails CI on any failed flow (and on a flaky one, unless
`--allow-flaky`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from scheduler.cli._common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    add_api_args,
    print_json,
    with_client,
)
from scheduler.cli.commands import summary
from scheduler.cli.report import add_report_flags, as_json, verdict_lines, write_reports
from scheduler.client.api_client import FleetClient
from scheduler.suites.flows import Flows, FlowsFileError, load, parse
from scheduler.suites.maestro import MaestroError, import_flow
from scheduler.suites.outcome import collect
from workers.core.errors import ConfigError


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("suite", help=summary("suite"))
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    v = verbs.add_parser("validate", help="check a flows file; every problem with its line")
    v.add_argument("file", type=Path)
    v.set_defaults(func=validate)
    r = verbs.add_parser("run", help="submit a flows file's matrix as one batch")
    r.add_argument("file", type=Path)
    add_api_args(r)
    r.add_argument("--only", action="append", default=[], metavar="NAME", help="just this flow")
    r.add_argument("--wait", action="store_true", help="wait for the batch, then report")
    r.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="--wait at most this long, in seconds (default: 1800)",
    )
    add_report_flags(r)
    r.set_defaults(func=with_client("suite run")(run))
    m = verbs.add_parser(
        "import", help="a Maestro flow as a flows file (every unmapped command named)"
    )
    m.add_argument("file", type=Path, help="the Maestro flow (YAML)")
    m.add_argument("-o", "--output", type=Path, help="write the flows file here (default: stdout)")
    m.add_argument("--suite", default="", help="the suite's name (default: the file's name)")
    m.set_defaults(func=import_maestro)


def read(path: Path, only: list[str] | None = None) -> Flows:
    """The flows file, or a `ConfigError` (exit 2): the problem itself when there is one,
    else every problem on stderr, each on its line, and their count."""
    try:
        flows = load(path)
    except FlowsFileError as exc:
        if len(exc.problems) == 1:  # one line: the problem is the error
            raise ConfigError(f"{exc.source}:{exc.problems[0]}") from None
        for problem in exc.problems:
            sys.stderr.write(f"{exc.source}:{problem}\n")
        n = len(exc.problems)
        raise ConfigError(f"{path}: {n} problems", hint="see docs/suites.md") from None
    if only:
        try:
            flows = flows.only(only)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return flows


def validate(args: argparse.Namespace) -> int:
    try:
        flows = read(args.file)
    except ConfigError as exc:
        sys.stderr.write(f"goalfleet suite validate: {exc}\n")
        return EXIT_BAD_INPUT
    cells = sum(len(f["matrix"]) for f in flows.body["flows"])
    n = len(flows.body["flows"])
    sys.stdout.write(f"{args.file}: suite {flows.suite}, {n} flows, {cells} matrix cells: ok\n")
    return EXIT_OK


def import_maestro(args: argparse.Namespace) -> int:
    """The Maestro flow as a flows file (stdout or `--output`); each unmapped command and each
    note on stderr with its line. Exit 0 when every command was mapped, 1 when one was not
    (the file is written, its head naming what was left out), 2 when it cannot be read or
    the result is not a valid flows file."""
    try:
        imported = import_flow(args.file, suite=args.suite)
        text = imported.yaml()
        parse(text, source=str(args.output or "<imported>"))
    except (MaestroError, FlowsFileError) as exc:
        sys.stderr.write(f"goalfleet suite import: {exc}\n")
        return EXIT_BAD_INPUT
    for line in [*map(str, imported.unmapped), *imported.notes]:
        sys.stderr.write(f"{line}\n")
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    steps = len(imported.flows["flows"][0]["steps"])
    left = len(imported.unmapped)
    sys.stderr.write(f"{args.file}: {steps} steps, {left} command(s) not mapped\n")
    return EXIT_OK if not left else EXIT_FAILED


def run(client: FleetClient, args: argparse.Namespace) -> int:
    if not args.wait and (args.junit is not None or args.html is not None):
        raise ConfigError(
            "--junit and --html are written when the batch has finished: add --wait, or run "
            "`goalfleet report BATCH --junit FILE --html FILE` later"
        )
    flows = read(args.file, args.only)
    batch = client.submit_batch(flows.body)
    if not args.wait:
        if args.json:
            print_json(batch.model_dump(mode="json"))
        else:
            sys.stdout.write(f"batch {batch.id}: suite {flows.suite}, {batch.total} runs\n")
        return EXIT_OK
    sys.stderr.write(f"batch {batch.id}: suite {flows.suite}, {batch.total} runs; waiting\n")
    try:
        client.wait_batch(batch.id, timeout_s=args.timeout)
    except TimeoutError:  # report what there is: the cases still running are incomplete
        sys.stderr.write(f"batch {batch.id} not finished after {args.timeout:g} s\n")
    report = collect(client, batch.id, pictures=args.junit is not None or args.html is not None)
    write_reports(report, args)
    if args.json:
        print_json(as_json(report))
    return verdict_lines(report, allow_flaky=args.allow_flaky)
