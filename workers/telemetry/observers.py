"""Observers of a run on the worker: the hooks metrics and logs hang off (issue 5).

The task calls every `RunObserver` at run start, after each step row is stored, and at the
end. An observer must not raise; the task shields the run from one that does, and logs it.

At the device seam, the log's `DeviceLog` and the metrics' `DeviceMetrics` are hooks on the
device's one chain (`workers.core.device_hooks`), each handed every command, timed once.
"""

from __future__ import annotations

from typing import Protocol

from workers.core.model import RunResult, StepRow
from workers.core.records import Question, RunRecord


class RunObserver(Protocol):
    def run_started(self, record: RunRecord, attempt: int) -> None: ...

    def step(self, record: RunRecord, row: StepRow) -> None: ...

    def run_finished(self, record: RunRecord, result: RunResult) -> None: ...

    def run_parked(self, record: RunRecord, result: RunResult, question: Question) -> None:
        """The run escalated past its last decider and waits for a person (not finished)."""
        ...


class NullObserver:
    """Does nothing; subclass and override what you need."""

    def run_started(self, record: RunRecord, attempt: int) -> None:
        pass

    def step(self, record: RunRecord, row: StepRow) -> None:
        pass

    def run_finished(self, record: RunRecord, result: RunResult) -> None:
        pass

    def run_parked(self, record: RunRecord, result: RunResult, question: Question) -> None:
        pass


class RecordingObserver(NullObserver):
    """The fake beside the seam: remembers what it saw (tests)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    def run_started(self, record: RunRecord, attempt: int) -> None:
        self.events.append(("started", record.id, attempt))

    def step(self, record: RunRecord, row: StepRow) -> None:
        self.events.append(("step", record.id, row.index))

    def run_finished(self, record: RunRecord, result: RunResult) -> None:
        self.events.append(("finished", record.id, result.status))

    def run_parked(self, record: RunRecord, result: RunResult, question: Question) -> None:
        self.events.append(("parked", record.id, (result.status, question.step)))
