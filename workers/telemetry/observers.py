"""Observers of a run on the worker: the hooks metrics and logs hang off (issue 5).

The task calls every `RunObserver` at run start, after each step row is stored, and at the
end. An observer must not raise; the task shields the run from one that does, and logs it.

At the device seam, one `WatchedDevice` wraps a `DevicePort` and hands each command, timed
once, to each of its `DeviceHook`s (the log's `DeviceLog`, the metrics' `DeviceMetrics`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from workers.core.model import ActionResult, InputValue, Platform, RunResult, Snapshot, StepRow
from workers.core.ports import DevicePort, expect_known_screen
from workers.core.records import Question, RunRecord
from workers.core.shots import Screenshot, ScreenshotPort, ScreenshotUnavailableError

_T = TypeVar("_T")


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


@dataclass(frozen=True)
class DeviceCommand:
    """One device command as a `WatchedDevice` saw it: it returned `result` or raised `error`."""

    name: str
    """snapshot | press | fill | close"""
    seconds: float
    meta: dict[str, object] = field(default_factory=dict)
    """The pinned ref, and a fill's input name and sensitivity: never a value."""
    result: Snapshot | ActionResult | None = None
    error: BaseException | None = None


DeviceHook = Callable[[DeviceCommand], None]
"""What a `WatchedDevice` hands each command to, once it returned or raised."""


class WatchedDevice:
    """A `DevicePort` that passes every command through to `inner`, times it, and hands it to
    each of `hooks` in turn (whether it returned or raised)."""

    def __init__(self, inner: DevicePort, *hooks: DeviceHook) -> None:
        self._inner = inner
        self._hooks = hooks

    @property
    def platform(self) -> Platform:
        return self._inner.platform

    def snapshot(self) -> Snapshot:
        return self._watch("snapshot", self._inner.snapshot, {})

    def press(self, pinned_ref: str) -> ActionResult:
        return self._watch("press", lambda: self._inner.press(pinned_ref), {"ref": pinned_ref})

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        meta = {"ref": pinned_ref, "input": value.name, "sensitive": value.sensitive}
        return self._watch("fill", lambda: self._inner.fill(pinned_ref, value), meta)

    def screenshot(self) -> Screenshot:
        """The inner device's picture (`ScreenshotPort`), watched like a command; a device
        without pictures says so, as an unwrapped one would."""
        inner = self._inner
        if not isinstance(inner, ScreenshotPort):
            raise ScreenshotUnavailableError("this device takes no screenshots")
        return self._watch("screenshot", inner.screenshot, {})

    def close(self) -> None:
        self._watch("close", self._inner.close, {})

    def expect_known_screen(self) -> None:
        expect_known_screen(self._inner)

    def _watch(self, name: str, call: Callable[[], _T], meta: dict[str, object]) -> _T:
        t0 = time.perf_counter()
        try:
            result = call()
        except BaseException as exc:
            self._observed(DeviceCommand(name, time.perf_counter() - t0, meta, error=exc))
            raise
        seconds = time.perf_counter() - t0
        shown = result if isinstance(result, Snapshot | ActionResult) else None
        self._observed(DeviceCommand(name, seconds, meta, result=shown))
        return result

    def _observed(self, command: DeviceCommand) -> None:
        for hook in self._hooks:
            hook(command)
