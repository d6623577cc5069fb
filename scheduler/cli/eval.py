"""`goalfleet eval`: measure deciders on the decide-step corpus, side by side.

goalfleet eval --decider rules                                 # the table
goalfleet eval --decider rules --decider openai/small --json   # per-case results as JSON
goalfleet eval --decider rules --min-accuracy 0.95             # a gate: exit 1 below it
goalfleet eval --capture 630daa7b >> my-cases.jsonl            # a run's steps as draft cases
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from scheduler.cli._common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    add_api_args,
    load_settings,
    make_client,
    print_json,
    report,
)
from scheduler.cli._render import inert, plain_console
from scheduler.cli.commands import summary
from workers.core.errors import ConfigError, GoalfleetError
from workers.core.model import NONE, StepRow
from workers.decide.evaluate import (
    DEFAULT_CASES,
    CandidateKey,
    EvalCase,
    Expect,
    Report,
    dump_case,
    evaluate,
    load_cases,
)
from workers.decide.factory import make_decider


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("eval", help=summary("eval"))
    p.add_argument(
        "--decider",
        action="append",
        default=[],
        metavar="SPEC",
        help="rules | <provider>/<model> (repeatable: one column each; default: rules)",
    )
    p.add_argument(
        "--cases", type=Path, default=None, help=f"a JSON-lines corpus (default: {DEFAULT_CASES})"
    )
    p.add_argument(
        "--min-accuracy",
        type=float,
        default=None,
        metavar="F",
        help="exit 1 when any decider's accuracy is below F (0-1), or it reports a false done",
    )
    p.add_argument(
        "--capture",
        metavar="RUN_ID",
        default=None,
        help="print a run's decided steps as draft cases (expect = what was decided; review it)",
    )
    add_api_args(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    try:
        if args.capture:
            return _capture(args)
        if args.min_accuracy is not None and not 0 <= args.min_accuracy <= 1:
            raise ConfigError("--min-accuracy must be between 0 and 1, e.g. 0.95")
        try:
            cases = load_cases(args.cases or DEFAULT_CASES)
        except OSError as exc:
            raise ConfigError(f"--cases: cannot read {args.cases}: {exc.strerror}") from None
        except ValueError as exc:
            raise ConfigError(f"--cases: {exc}") from None
        settings = load_settings()
        specs = args.decider or ["rules"]
        reports = [_run(spec, cases, settings.model_settings(), err) for spec in specs]
    except GoalfleetError as exc:
        return report(exc, "eval")
    if args.json:
        print_json(
            {
                "cases": len(cases),
                "deciders": [
                    {"summary": r.summary(), "cases": [vars(x) for x in r.results]} for r in reports
                ],
            }
        )
    else:
        _print(reports, plain_console())
    if args.min_accuracy is not None:
        failing = [r for r in reports if r.accuracy < args.min_accuracy or r.false_done]
        for r in failing:
            err.print(
                f"goalfleet eval: {r.decider} is below the bar: accuracy {r.accuracy:.1%} "
                f"(min {args.min_accuracy:.1%}), false done {r.false_done}",
                markup=False,
                highlight=False,
            )
        return EXIT_FAILED if failing else EXIT_OK
    return EXIT_OK


def _run(spec: str, cases: list[EvalCase], model: Any, err: Console) -> Report:  # noqa: ANN401
    decider = make_decider(spec, model)
    if not err.is_terminal or len(cases) < 20:  # noqa: PLR2004 - a bar only where it helps
        return evaluate(decider, cases, name=spec)
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"{spec}", total=len(cases))
        return evaluate(decider, cases, name=spec, progress=lambda _: bar.advance(task))


ROWS = (
    ("cases", "cases", "{}"),
    ("correct", "correct", "{}"),
    ("accuracy", "accuracy", "{:.1%}"),
    ("false done", "false_done", "{}"),
    ("distractor presses", "distractor_presses", "{}"),
    ("errors", "errors", "{}"),
    ("latency p50 ms", "latency_ms_p50", "{:.1f}"),
    ("latency p95 ms", "latency_ms_p95", "{:.1f}"),
    ("input tokens p50 (ours)", "tokens_ours_p50", "{:g}"),
    ("input tokens max (ours)", "tokens_ours_max", "{:g}"),
    ("input tokens p50 (billed)", "tokens_billed_p50", "{:g}"),
    ("below min_confidence 0.5", "low_confidence", "{}"),
    ("model requests", "calls", "{}"),
    ("extra requests (re-asks, fallbacks)", "reasks", "{}"),
)


def _print(reports: list[Report], out: Console) -> None:
    wrong = Table(title="wrong answers", title_justify="left")
    for col in ("decider", "case", "expected", "answer"):
        wrong.add_column(col)
    for r in reports:
        for x in r.results:
            if not x.correct:
                wrong.add_row(
                    *(inert(v) for v in (r.decider, x.case_id, x.expected, x.error or x.answer))
                )
    if wrong.row_count:
        out.print(wrong)
    table = Table(title="decide-step eval", title_justify="left")
    table.add_column("")
    for r in reports:
        table.add_column(inert(r.decider), justify="right")
    summaries = [r.summary() for r in reports]
    for label, key, fmt in ROWS:
        table.add_row(label, *(fmt.format(s[key]) for s in summaries))
    out.print(table)
    tags = Table(title="by tag: accuracy (false done)", title_justify="left")
    tags.add_column("tag")
    for r in reports:
        tags.add_column(inert(r.decider), justify="right")
    scores = [{s.tag: s for s in r.by_tag()} for r in reports]
    for tag in sorted({tag for by in scores for tag in by}):
        cells = [
            f"{s.accuracy:.1%} of {s.cases} ({s.false_done})" if (s := by.get(tag)) else "-"
            for by in scores
        ]
        tags.add_row(inert(tag), *cells)
    out.print(tags)


def _capture(args: argparse.Namespace) -> int:
    with make_client(load_settings(), args) as client:
        record = client.run(args.capture)
        rows = client.steps(record.id)
    count = 0
    for row in rows:
        case = _draft(record.id, row)
        if case is not None:
            sys.stdout.write(dump_case(case) + "\n")
            count += 1
    if count == 0:
        Console(stderr=True).print(
            f"goalfleet eval: run {record.id} has no decided steps to capture",
            markup=False,
            highlight=False,
        )
        return EXIT_BAD_INPUT
    return EXIT_OK


def _draft(run_id: str, row: StepRow) -> EvalCase | None:
    """A step as a case whose `expect` is what was decided: a draft for a person to correct."""
    state, d = row.seen, row.decision
    if state is None or d is None:
        return None
    if d.done or d.blocked:
        expect = Expect(done=d.done, blocked=d.blocked and not d.done)
    else:
        key = CandidateKey.of(state.candidates, d.target)
        if key is None:
            return None
        expect = Expect(target=key, input=None if d.input == NONE else d.input)
    return EvalCase(
        id=f"run-{run_id[:12]}-{row.index}",
        source=f"run:{run_id}",
        tags=("captured", "needs-review"),
        state=state,
        expect=expect,
        note=f"captured from step {row.index} ({row.outcome.value}); check expect",
    )
