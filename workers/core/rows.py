"""A step row being built phase by phase, how a step ends a run, and the run's totals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Self, TypeVar

from workers.core.backoff import Backoff
from workers.core.errors import DeviceError, FatalDeviceError, GoalfleetError, TransientDeviceError
from workers.core.model import (
    Action,
    ActionKind,
    ActionResult,
    Attempt,
    Candidate,
    DecideState,
    Decision,
    InputValue,
    MemoryNote,
    Outcome,
    PhaseTotals,
    RunStatus,
    Snapshot,
    StepRow,
)

TRANSIENT_RETRIES = 3
"""Retries of one device call on `TransientDeviceError`, with exponential backoff."""
TRANSIENT_BACKOFF = Backoff(base_s=0.05, cap_s=1.0, jitter=0)
"""A device command's retry after a transient error: one device's own, so no jitter."""
_T = TypeVar("_T")


def retry_transient(call: Callable[[], _T], sleep: Callable[[float], None]) -> _T:
    """`call()`, again after a `TransientDeviceError` up to `TRANSIENT_RETRIES` times (with
    `TRANSIENT_BACKOFF` between), the last error raised."""
    for attempt in range(TRANSIENT_RETRIES + 1):
        try:
            return call()
        except TransientDeviceError:
            if attempt == TRANSIENT_RETRIES:
                raise
            sleep(TRANSIENT_BACKOFF.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class End:
    """Why the run ends after this step."""

    status: RunStatus
    reason: str
    error: GoalfleetError | None = None


def device_end(exc: DeviceError) -> End:
    if isinstance(exc, FatalDeviceError):
        return End(RunStatus.ERRORED, f"device failed: {exc}", exc)
    if isinstance(exc, TransientDeviceError):
        return End(
            RunStatus.ERRORED, f"device kept failing after {TRANSIENT_RETRIES} retries: {exc}", exc
        )
    return End(RunStatus.ERRORED, f"device error: {exc}", exc)


def action_on(snap: Snapshot, target: Candidate, value: InputValue | None) -> Action:
    """The row's action: fill `value` into `target`, or press it (None), pinned to `snap`."""
    pinned = snap.pin(target.ref)
    if value is None:
        return Action(kind=ActionKind.PRESS, ref=target.ref, pinned=pinned)
    return Action(
        kind=ActionKind.FILL,
        ref=target.ref,
        pinned=pinned,
        input=value.name,
        shown_value=value.shown(),
    )


Phase = Literal["snapshot", "decide", "action"]


class Timed:
    """`with row.timed(phase, clock) as t:` adds the block's milliseconds to the row's phase
    when the block ends, by an exception too (a failed phase keeps its real duration);
    afterwards `t.ms` is what this block took."""

    __slots__ = ("_clock", "_phase", "_row_ms", "_t0", "ms")

    def __init__(
        self, row_ms: dict[Phase, float], phase: Phase, clock: Callable[[], float]
    ) -> None:
        self._row_ms = row_ms
        self._phase: Phase = phase
        self._clock = clock
        self._t0 = 0.0
        self.ms = 0.0

    def __enter__(self) -> Self:
        self._t0 = self._clock()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.ms = (self._clock() - self._t0) * 1000
        self._row_ms[self._phase] += self.ms


@dataclass
class Row:
    """A step row being filled in, phase by phase; `finish` freezes it."""

    index: int
    snap: Snapshot | None = None
    seen: DecideState | None = None
    memory: MemoryNote | None = None
    decision: Decision | None = None
    attempts: tuple[Attempt, ...] = ()
    action: Action | None = None
    result: ActionResult | None = None
    ms: dict[Phase, float] = field(
        default_factory=lambda: {"snapshot": 0.0, "decide": 0.0, "action": 0.0}
    )
    """Time spent in each phase so far (`timed`)."""

    def timed(self, phase: Phase, clock: Callable[[], float]) -> Timed:
        return Timed(self.ms, phase, clock)

    def finish(self, outcome: Outcome, error: str | None = None) -> StepRow:
        snap = self.snap
        return StepRow(
            index=self.index,
            screen=snap.screen if snap else "",
            fingerprint=snap.fingerprint if snap else "",
            refs_generation=snap.refs_generation if snap else "",
            candidates=len(snap.candidates) if snap else 0,
            decision=self.decision,
            action=self.action,
            result=self.result,
            outcome=outcome,
            error=error,
            snapshot_ms=round(self.ms["snapshot"], 3),
            decide_ms=round(self.ms["decide"], 3),
            action_ms=round(self.ms["action"], 3),
            seen=self.seen,
            memory=self.memory,
            attempts=self.attempts,
        )


Step = tuple[StepRow, End | None]
"""One step's row, and why the run ends there (None: carry on)."""


def totals(steps: tuple[StepRow, ...] | list[StepRow]) -> PhaseTotals:
    """Phase durations and token usage summed over a run's rows: the one totals function."""
    return PhaseTotals(
        snapshot_ms=round(sum(s.snapshot_ms for s in steps), 3),
        decide_ms=round(sum(s.decide_ms for s in steps), 3),
        action_ms=round(sum(s.action_ms for s in steps), 3),
        input_tokens=sum(s.decision.usage.input_tokens for s in steps if s.decision),
        output_tokens=sum(s.decision.usage.output_tokens for s in steps if s.decision),
        cost=sum(d.usage.cost for s in steps for d in paid_decisions(s)),
    )


def paid_decisions(step: StepRow) -> list[Decision]:
    """Every decision a step paid for: each decider of its chain (the last is the row's)."""
    asked = [a.decision for a in step.attempts if a.decision is not None]
    return asked or ([step.decision] if step.decision is not None else [])
