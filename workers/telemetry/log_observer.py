"""The log observer: one canonical line per step and one per run (structlog).

Hung off the task's `RunObserver` hooks, so the loop and the task stay free of log calls that
describe a run. Every line carries the run's context (`run_id`, `device_id`, `attempt`,
`step`), bound here with contextvars and cleared when the run ends.

    step.finished  screen=Sign in target=e3 input=email action=fill @e3~s91 value=a@b.c
                   confidence=0.9 outcome=acted snapshot_ms=41 decide_ms=812 action_ms=95
                   input_tokens=412 output_tokens=31
    run.finished   status=done reason=... steps=4 snapshot_ms=... decide_ms=... tokens...

`DeviceLog` (the same idea at the device seam, a hook on its chain: `core.device_hooks`) logs
each device command at debug level with the pinned ref it acted on and how long it took.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from workers.core.device_hooks import DeviceCommand, DeviceHook
from workers.core.errors import DeviceError
from workers.core.model import Outcome, RunResult, RunStatus, Snapshot, StepRow
from workers.core.records import Question, RunRecord
from workers.telemetry import logs

STEP_EVENT = "step.finished"
MEMORY_INVALIDATED_EVENT = "memory.invalidated"
PARKED_EVENT = "run.parked"
RUN_STARTED_EVENT = "run.started"
RUN_EVENT = "run.finished"
DEVICE_EVENT = "device.command"


def step_fields(row: StepRow) -> dict[str, object]:
    """The canonical step line's fields (also what tests assert on)."""
    d = row.decision
    fields: dict[str, object] = {
        "step": row.index,
        "screen": row.screen,
        "candidates": row.candidates,
        "target": None,
        "input": None,
        "done": False,
        "blocked": False,
        "confidence": None,
        "reason": None,
        "action": None,
        "value": None,
        "outcome": row.outcome.value,
        "snapshot_ms": round(row.snapshot_ms, 1),
        "decide_ms": round(row.decide_ms, 1),
        "action_ms": round(row.action_ms, 1),
        "input_tokens": 0,
        "output_tokens": 0,
    }
    if row.memory is not None:
        fields["memory"] = row.memory.outcome
    if d is not None:
        fields["decided_by"] = d.decided_by or None
        fields.update(
            target=d.target,
            input=d.input,
            done=d.done,
            blocked=d.blocked,
            confidence=d.confidence,
            reason=d.reason or None,
            input_tokens=d.usage.input_tokens,
            output_tokens=d.usage.output_tokens,
        )
    if row.action is not None:
        fields["action"] = row.action.label
        fields["value"] = row.action.shown_value
    if row.result is not None:
        fields["changed"] = row.result.changed
    if row.error:
        fields["error"] = row.error
    return fields


def run_fields(result: RunResult) -> dict[str, object]:
    t = result.totals
    fields: dict[str, object] = {
        "status": result.status.value,
        "reason": result.reason,
        "steps": len(result.steps),
        "duration_ms": round(result.duration_ms, 1),
        "snapshot_ms": round(t.snapshot_ms, 1),
        "decide_ms": round(t.decide_ms, 1),
        "action_ms": round(t.action_ms, 1),
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens,
    }
    if result.error is not None:
        fields["error_type"] = result.error.type
        fields["error_code"] = result.error.code
    return fields


class LogObserver:
    """A `RunObserver` that writes the canonical lines. Never raises."""

    def __init__(self, logger: Any = None) -> None:  # noqa: ANN401 - structlog loggers are dynamic
        self._log = logger if logger is not None else logs.get_logger("goalfleet.run")

    def run_started(self, record: RunRecord, attempt: int) -> None:
        logs.bind_run(
            run_id=record.id, device_id=record.device, attempt=attempt, batch_id=record.batch
        )
        if not self._log.is_enabled_for(logging.INFO):
            return
        self._log.info(
            RUN_STARTED_EVENT,
            goal=record.request.goal,
            decider=record.request.decider,
            max_steps=record.request.max_steps,
            queued_s=round(max(0.0, time.time() - record.submitted_at), 3),
        )

    def step(self, record: RunRecord, row: StepRow) -> None:  # noqa: ARG002 - the hook's shape
        logs.bind_step(row.index)
        level = logging.WARNING if row.outcome is Outcome.ERRORED else logging.INFO
        if self._log.is_enabled_for(level):  # a worker at WARNING builds no step line
            fields = step_fields(row)
            fields.pop("step")
            self._log.log(level, STEP_EVENT, **fields)
        if row.memory is not None and row.memory.outcome == "invalidated":
            self._log.warning(
                MEMORY_INVALIDATED_EVENT,
                entry=row.memory.entry,
                source=row.memory.source,
                why=row.memory.why,
            )

    def run_finished(self, record: RunRecord, result: RunResult) -> None:
        # bound afresh: the run may end without having started (attempt cap), and the last
        # step's `step` must not ride on the run's line
        logs.bind_run(
            run_id=record.id,
            device_id=result.device_id or record.device,
            attempt=result.attempt,
            batch_id=record.batch,
        )
        ok = result.status in {RunStatus.DONE, RunStatus.CANCELLED}
        level = logging.INFO if ok else logging.WARNING
        try:
            if self._log.is_enabled_for(level):
                self._log.log(level, RUN_EVENT, **run_fields(result))
        finally:
            logs.clear_run()

    def run_parked(self, record: RunRecord, result: RunResult, question: Question) -> None:
        logs.bind_run(
            run_id=record.id,
            device_id=result.device_id or record.device,
            attempt=result.attempt,
            batch_id=record.batch,
        )
        try:
            self._log.warning(
                PARKED_EVENT,
                step=question.step,
                reason=question.reason,
                deciders=[a.decider for a in question.attempts],
                deadline=question.deadline,
            )
        finally:
            logs.clear_run()


class DeviceLog(DeviceHook):
    """A device hook (`workers.core.device_hooks`) that logs each command (debug) with its
    pinned ref and duration.

    Fill values are never logged, not even masked: only the input's name and sensitivity.
    """

    def __init__(self, logger: Any = None) -> None:  # noqa: ANN401 - structlog loggers are dynamic
        self._log = logger if logger is not None else logs.get_logger("goalfleet.device")

    def after(self, command: DeviceCommand) -> None:
        if not self._log.is_enabled_for(logging.DEBUG):  # the usual case: nothing to build
            return
        fields = dict(command.meta)
        if command.error is not None:
            if not isinstance(command.error, DeviceError):
                return  # a bug: it propagates, and says so itself
            fields["error"] = type(command.error).__name__
        elif isinstance(command.result, Snapshot):
            snap = command.result
            fields.update(
                refs_generation=snap.refs_generation,
                nodes=len(snap.nodes),
                candidates=len(snap.candidates),
            )
        elif command.result is not None:
            fields["changed"] = command.result.changed
        ms = round(command.seconds * 1000, 1)
        self._log.debug(DEVICE_EVENT, command=command.name, ms=ms, **fields)
