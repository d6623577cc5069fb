"""What the history keeps of an ended run: a `RunRow` and its `StepRow`s as plain tuples in
the columns' order (`migrations/0001_runs_steps.sql`).

Only names, statuses, counts and times leave Redis. The request's body (its inputs' values, its
secrets' references) is never copied; the free texts that could quote a typed value — the run's
reason, a screen's name, the decided element's name — have every plain input's value replaced by
`{name}` (`Inputs.scrub`, as the loop scrubs its step rows). Secret values never reach the
fleet's Redis in the first place (the worker redacts them before it writes a row), so none can
reach the database.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workers.core.model import Inputs, RunStatus, StepRow
from workers.core.records import DeviceInfo, RunRecord

UNCOUNTED = frozenset({RunStatus.CANCELLED, RunStatus.UNPLACEABLE})
"""Ends that say nothing about the flow or the device (the run never ran to its end): kept, but
left out of pass, flaky and failure rates."""


@dataclass(frozen=True)
class RunRow:
    run_id: str
    attempt: int
    batch: str
    suite: str
    flow: str
    goal: str
    device: str
    device_class: str
    platform: str
    labels: str
    status: str
    passed: int
    counted: int
    reason: str
    error_code: str
    submitted_at: float
    started_at: float | None
    finished_at: float
    steps: int
    duration_ms: float
    snapshot_ms: float
    decide_ms: float
    action_ms: float
    input_tokens: int
    output_tokens: int
    decided_by: str
    cost: float = 0.0
    """What its model calls cost by the operator's price table (`workers.core.cost`)."""
    follows: int = 0
    """1 when a counted run of this flow on this device ended before it (set by the write)."""
    flipped: int = 0
    """1 when that run's outcome (passed or not) differs from this one's."""


@dataclass(frozen=True)
class StepHistory:
    run_id: str
    attempt: int
    step: int
    flow: str
    finished_at: float
    screen: str
    decision: str
    outcome: str
    snapshot_ms: float
    decide_ms: float
    action_ms: float
    decided_by: str
    artifact: str


RUN_COLUMNS = tuple(RunRow.__dataclass_fields__)
STEP_COLUMNS = tuple(StepHistory.__dataclass_fields__)


@dataclass(frozen=True)
class RunHistory:
    """One ended run as the history stores it."""

    run: RunRow
    steps: tuple[StepHistory, ...]

    def run_values(self) -> tuple[object, ...]:
        return tuple(vars(self.run).values())  # in field order; `astuple` deep-copies (slow)

    def step_values(self) -> list[tuple[object, ...]]:
        return [tuple(vars(s).values()) for s in self.steps]


def device_class(info: DeviceInfo | None) -> str:
    """The peers a device is compared with: its `class` label when it has one, else platform,
    model and OS major version (`ios/iPhone15/17`), whatever of them is known."""
    if info is None:
        return "unknown"
    if cls := info.labels.get("class"):
        return cls
    major = info.os_version.split(".", 1)[0]
    return "/".join(p for p in (info.platform.value, info.model, major) if p)


def _decision(row: StepRow, scrub: Callable[[str], str]) -> str:
    d = row.decision
    if d is None:
        return ""
    if d.done:
        return "done"
    if d.blocked:
        return "blocked"
    if row.action is None:
        return d.target
    if not row.action.ref:  # a move: no element of the screen
        return row.action.label
    names = {c.ref: c.name for c in row.seen.candidates} if row.seen else {}
    name = scrub(names.get(row.action.ref, row.action.ref))
    into = f" <- {{{row.action.input}}}" if row.action.input else ""
    return f"{row.action.kind.value} '{name}'{into}"


def _decided_by(row: StepRow) -> str:
    return row.decision.decided_by if row.decision else ""


def history_of(
    record: RunRecord,
    steps: Sequence[StepRow],
    info: DeviceInfo | None,
    *,
    peers: str | None = None,
) -> RunHistory:
    """The run's rows: `steps` are its last attempt's (the claim wipes earlier ones); its
    device's class is `peers` when given, else `device_class(info)`."""
    result = record.result
    scrub = Inputs.of(record.request.inputs).scrub  # as the loop scrubs its rows
    finished = record.finished_at or record.started_at or record.submitted_at
    flow = record.flow or record.request.goal.strip()  # a suite's flow by name, else the goal
    totals = result.totals if result else None
    status = record.status
    decided = Counter(by for s in steps if (by := _decided_by(s)))
    run = RunRow(
        run_id=record.id,
        attempt=record.attempt,
        batch=record.batch or "",
        suite=record.suite or "",
        flow=flow,
        goal=record.request.goal,
        device=record.device or "",
        device_class=peers or (device_class(info) if record.device else ""),
        platform=info.platform.value if info else "",
        labels=json.dumps(dict(sorted(info.labels.items())) if info else {}),
        status=status.value,
        passed=int(status is RunStatus.DONE),
        counted=int(status not in UNCOUNTED),
        reason=scrub(result.reason if result else record.reason),
        error_code=(result.error.code or result.error.type) if result and result.error else "",
        submitted_at=record.submitted_at,
        started_at=record.started_at,
        finished_at=finished,
        steps=len(steps),
        duration_ms=result.duration_ms if result else 0.0,
        snapshot_ms=totals.snapshot_ms if totals else 0.0,
        decide_ms=totals.decide_ms if totals else 0.0,
        action_ms=totals.action_ms if totals else 0.0,
        input_tokens=totals.input_tokens if totals else 0,
        output_tokens=totals.output_tokens if totals else 0,
        decided_by=json.dumps(dict(sorted(decided.items()))),
        cost=totals.cost if totals else 0.0,
    )
    rows = tuple(
        StepHistory(
            run_id=record.id,
            attempt=record.attempt,
            step=s.index,
            flow=flow,
            finished_at=finished,
            screen=scrub(s.screen),
            decision=_decision(s, scrub),
            outcome=s.outcome.value,
            snapshot_ms=s.snapshot_ms,
            decide_ms=s.decide_ms,
            action_ms=s.action_ms,
            decided_by=_decided_by(s),
            artifact=s.screenshot or "",
        )
        for s in steps
    )
    return RunHistory(run=run, steps=rows)
