"""A step row being built phase by phase, how a step ends a run, and the run's totals."""

from __future__ import annotations

from dataclasses import dataclass

from workers.core.errors import DeviceError, FatalDeviceError, GoalfleetError, TransientDeviceError
from workers.core.model import (
    Action,
    ActionResult,
    Attempt,
    DecideState,
    Decision,
    MemoryNote,
    Outcome,
    PhaseTotals,
    RunStatus,
    Snapshot,
    StepRow,
)

TRANSIENT_RETRIES = 3
"""Retries of one device call on `TransientDeviceError`, with exponential backoff."""


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


@dataclass
class Row:
    """A step row being filled in, phase by phase; `finish` freezes it."""

    index: int
    snap: Snapshot | None = None
    snapshot_ms: float = 0.0
    decide_ms: float = 0.0
    action_ms: float = 0.0
    decision: Decision | None = None
    action: Action | None = None
    result: ActionResult | None = None
    seen: DecideState | None = None
    memory: MemoryNote | None = None
    attempts: tuple[Attempt, ...] = ()

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
            snapshot_ms=round(self.snapshot_ms, 3),
            decide_ms=round(self.decide_ms, 3),
            action_ms=round(self.action_ms, 3),
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
    )
