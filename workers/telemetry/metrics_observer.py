"""The metrics observer: records a worker's run, step and device-command metrics.

A `RunObserver` (hooks called by the task) plus `DeviceMetrics` (a hook on the device's
chain, `workers.core.device_hooks`), so neither the loop nor the task carries metric calls.
Labels are bounded: platform, phase, outcome, status, command, direction. Never a run id.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from workers.core.device_hooks import DeviceCommand, DeviceHook
from workers.core.errors import TransientDeviceError
from workers.core.model import Outcome, Platform, RunResult, RunStatus, StepRow
from workers.core.ports import DEVICE_ACTIONS
from workers.core.records import Question, RunRecord
from workers.core.rows import paid_decisions
from workers.telemetry.metrics import WorkerMetrics, labelled, worker_metrics

PHASES = ("snapshot", "decide", "action")
TERMINAL_STATUSES = tuple(s.value for s in RunStatus if s.terminal)
MEMORY_EVENTS = ("hit", "miss", "invalidated", "write")
DECIDED_BY = ("memory", "rules", "model", "scripted", "human")


def escalations(row: StepRow) -> list[tuple[str, str]]:
    """(decider, cause) for every escalation in the row: a chain's attempts, or the one
    decider's. Causes: low_confidence, invalid (no valid answer), guard."""
    if row.attempts:
        return [(a.decider, _cause(a.escalated)) for a in row.attempts if a.escalated]
    if row.outcome is not Outcome.ESCALATED:
        return []
    who = (row.decision.decided_by if row.decision else "") or "decider"
    if row.decision is None:
        return [(who, "invalid")]
    return [(who, "guard" if row.error else "low_confidence")]


def _cause(text: str) -> str:
    if text.startswith("confidence"):
        return "low_confidence"
    if text.startswith("no valid decision"):
        return "invalid"
    return "guard"


class MetricsObserver:
    """A `RunObserver` for one worker (its device's platform labels every sample)."""

    def __init__(
        self,
        platform: Platform,
        metrics: WorkerMetrics | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.platform = platform.value
        self._m = metrics
        self._clock = clock

    @property
    def m(self) -> WorkerMetrics:
        # resolved at first use, in the process that records (the pool child)
        if self._m is None:
            self._m = worker_metrics()
        return self._m

    def prime(self) -> None:
        """Create this worker's series at zero (every label set it can produce), so rates and
        quantiles see the first observation as an increase: a series that appears with its
        first value loses that increase to `rate()`."""
        m = self.m
        for status in TERMINAL_STATUSES:
            labelled(m.runs, self.platform, status)
            labelled(m.run_duration_seconds, self.platform, status)
        labelled(m.queue_wait_seconds, self.platform)
        for outcome in Outcome:
            labelled(m.steps, self.platform, outcome.value)
            for phase in PHASES:
                labelled(m.step_phase_seconds, phase, self.platform, outcome.value)
        for direction in ("input", "output"):
            labelled(m.decide_tokens, self.platform, direction)
        labelled(m.stale_ref_resnapshots, self.platform)
        labelled(m.run_redeliveries, self.platform)
        for command in ("snapshot", "press", "fill", *DEVICE_ACTIONS):
            labelled(m.device_transient_errors, self.platform, command)
            labelled(m.device_command_seconds, self.platform, command)
        labelled(m.worker_busy, self.platform).set(0)
        for event in MEMORY_EVENTS:
            labelled(m.memory_events, self.platform, event)
        for who in DECIDED_BY:
            labelled(m.decide_seconds, self.platform, who)

    def run_started(self, record: RunRecord, attempt: int) -> None:
        m = self.m
        labelled(m.worker_busy, self.platform).set(1)
        labelled(m.queue_wait_seconds, self.platform).observe(
            max(0.0, self._clock() - record.submitted_at)
        )
        if attempt > 1:
            labelled(m.run_redeliveries, self.platform).inc()

    def step(self, record: RunRecord, row: StepRow) -> None:  # noqa: ARG002 - the hook's shape
        m = self.m
        outcome = row.outcome.value
        labelled(m.steps, self.platform, outcome).inc()
        for phase, ms in zip(PHASES, (row.snapshot_ms, row.decide_ms, row.action_ms), strict=True):
            if phase == "action" and row.action is None:
                continue  # no action was taken; a zero would drag the action quantiles down
            if phase == "decide" and row.decision is None:
                continue
            labelled(m.step_phase_seconds, phase, self.platform, outcome).observe(ms / 1000)
        if row.decision is not None:
            usage = row.decision.usage
            labelled(m.decide_tokens, self.platform, "input").inc(usage.input_tokens)
            labelled(m.decide_tokens, self.platform, "output").inc(usage.output_tokens)
        cost = sum(d.usage.cost for d in paid_decisions(row))
        if cost:
            labelled(m.decide_cost, self.platform).inc(cost)
        if row.outcome is Outcome.STALE:
            labelled(m.stale_ref_resnapshots, self.platform).inc()
        for decider, cause in escalations(row):
            labelled(m.escalations, self.platform, cause, decider).inc()
        if row.memory is not None:
            labelled(m.memory_events, self.platform, row.memory.outcome).inc()
        if row.decision is not None and row.decision.decided_by:
            labelled(m.decide_seconds, self.platform, row.decision.decided_by).observe(
                row.decide_ms / 1000
            )

    def run_finished(self, record: RunRecord, result: RunResult) -> None:  # noqa: ARG002 - the hook's shape
        m = self.m
        labelled(m.runs, self.platform, result.status.value).inc()
        labelled(m.run_duration_seconds, self.platform, result.status.value).observe(
            result.duration_ms / 1000
        )
        labelled(m.worker_busy, self.platform).set(0)
        if result.memory_writes:
            labelled(m.memory_events, self.platform, "write").inc(result.memory_writes)

    def run_parked(self, record: RunRecord, result: RunResult, question: Question) -> None:  # noqa: ARG002 - the hook's shape
        m = self.m
        labelled(m.questions, self.platform).inc()
        labelled(m.worker_busy, self.platform).set(0)


class DeviceMetrics(DeviceHook):
    """A device hook (`workers.core.device_hooks`): each command's time, and its transient
    failures, for the device's `platform`."""

    def __init__(self, platform: Platform, metrics: WorkerMetrics | None = None) -> None:
        self._m = metrics or worker_metrics()
        self._platform = platform.value

    def after(self, command: DeviceCommand) -> None:
        if command.name == "close":
            return  # not a device round trip worth a series
        if isinstance(command.error, TransientDeviceError):
            labelled(self._m.device_transient_errors, self._platform, command.name).inc()
        labelled(self._m.device_command_seconds, self._platform, command.name).observe(
            command.seconds
        )
