"""`run_goal`: the goal-driven step loop.

Each step: snapshot → (done_when?) → decide → press/fill the chosen ref pinned to the snapshot's
generation, with settle → read "did anything change" from the settle diff → one `StepRow`.

"Exactly one row per step" holds by structure: `_Run.step` returns its row and, when the run
ends there, why (`_End`); `_Run.run` is the only place that records a row. A step that fails
inside a phase still returns a row, with that phase's real duration.

This module imports only the model, the parameters, the errors and the two ports.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from workers.core.errors import (
    DecideError,
    DecisionInvalidError,
    DeviceError,
    FatalDeviceError,
    GoalfleetError,
    StaleRefError,
    TransientDeviceError,
)
from workers.core.model import (
    NONE,
    Action,
    ActionKind,
    ActionResult,
    Candidate,
    DecideState,
    Decision,
    ErrorInfo,
    Inputs,
    Kind,
    Outcome,
    PhaseTotals,
    RunResult,
    RunStatus,
    Snapshot,
    StepRow,
)
from workers.core.params import DEFAULT_PARAMS, HISTORY_LINES, RunParams
from workers.core.ports import Decider, DevicePort

MAX_STALE_IN_A_ROW = 3
"""Consecutive stale-ref steps before the run ends `errored`: the screen will not hold still."""
TRANSIENT_RETRIES = 3
"""Retries of one device call on `TransientDeviceError`, with exponential backoff."""
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 1.0
DEFAULT_DANGEROUS = ("delete", "purchase", "buy", "pay", "erase", "transfer", "unsubscribe")
"""Words that make a control dangerous: choosing it escalates instead of pressing. Matched as
whole words, case-insensitively ("Pay now" is dangerous, "Display" is not)."""

_T = TypeVar("_T")
StepHook = Callable[[StepRow], None]
CancelCheck = Callable[[], bool]


@dataclass(frozen=True)
class _End:
    """Why the run ends after this step."""

    status: RunStatus
    reason: str
    error: GoalfleetError | None = None


def _device_end(exc: DeviceError) -> _End:
    if isinstance(exc, FatalDeviceError):
        return _End(RunStatus.ERRORED, f"device failed: {exc}", exc)
    if isinstance(exc, TransientDeviceError):
        return _End(
            RunStatus.ERRORED, f"device kept failing after {TRANSIENT_RETRIES} retries: {exc}", exc
        )
    return _End(RunStatus.ERRORED, f"device error: {exc}", exc)


@dataclass
class _Row:
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
        )


Step = tuple[StepRow, _End | None]
"""One step's row, and why the run ends there (None: carry on)."""


@dataclass
class _Run:
    device: DevicePort
    goal: str
    decider: Decider
    inputs: Inputs
    params: RunParams
    should_cancel: CancelCheck | None
    dangerous: re.Pattern[str] | None
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    history: list[str] = field(default_factory=list)
    used_inputs: list[str] = field(default_factory=list)
    unproductive: int = 0
    stale: int = 0

    # -- device calls with bounded retry of transient errors ------------------------------

    def _retrying(self, call: Callable[[], _T]) -> _T:
        for attempt in range(TRANSIENT_RETRIES + 1):
            try:
                return call()
            except TransientDeviceError:
                if attempt == TRANSIENT_RETRIES:
                    raise
                self.sleep(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- one step: snapshot → decide → judge → act ------------------------------------------

    def step(self, index: int) -> Step:
        row = _Row(index)
        t0 = self.clock()
        try:
            row.snap = snap = self._retrying(self.device.snapshot)
        except DeviceError as exc:
            row.snapshot_ms = (self.clock() - t0) * 1000
            return row.finish(Outcome.ERRORED, error=str(exc)), _device_end(exc)
        row.snapshot_ms = (self.clock() - t0) * 1000

        done_when = self.params.done_when
        if done_when and snap.shows(done_when):
            row.decision = Decision(done=True, reason=f"done_when {done_when!r} is visible")
            return row.finish(Outcome.DONE), _End(RunStatus.DONE, f"{done_when!r} is visible")

        row.seen = state = self._state(snap, index)
        t1 = self.clock()
        try:
            row.decision = decision = self.decider.decide(state)
        except DecisionInvalidError as exc:
            row.decide_ms = (self.clock() - t1) * 1000
            end = _End(RunStatus.ESCALATED, f"no valid decision: {exc}", exc)
            return row.finish(Outcome.ESCALATED, error=str(exc)), end
        except DecideError as exc:
            row.decide_ms = (self.clock() - t1) * 1000
            end = _End(RunStatus.ERRORED, f"decider failed: {exc}", exc)
            return row.finish(Outcome.ERRORED, error=str(exc)), end
        row.decide_ms = (self.clock() - t1) * 1000

        verdict = self._judge(decision, snap)
        if verdict is not None:
            return verdict(row)
        target = snap.candidate(decision.target)
        if target is None:  # _judge returns a verdict for this; kept for the type checker
            raise AssertionError("judged decision has no target")
        return self._act(row, snap, decision, target)

    def _state(self, snap: Snapshot, index: int) -> DecideState:
        """What the decider is asked: names and texts only, scrubbed of every input value."""
        return self.inputs.scrub_state(
            DecideState(
                goal=self.goal,
                step=index,
                candidates=snap.candidates,
                context=snap.context,
                input_names=self.inputs.names(),
                used_inputs=tuple(self.used_inputs),
                history=tuple(self.history[-HISTORY_LINES:]),
                done_when=self.params.done_when,
                screen=snap.screen,
            )
        )

    def _judge(self, d: Decision, snap: Snapshot) -> Callable[[_Row], Step] | None:
        """The step's end when the decision says so or cannot be acted on safely, else None."""
        if d.done:
            reason = d.reason or "the decider reports the goal reached"
            return lambda row: (row.finish(Outcome.DONE), _End(RunStatus.DONE, reason))
        if d.blocked:
            reason = d.reason or "the decider reports it cannot progress"
            return lambda row: (row.finish(Outcome.BLOCKED), _End(RunStatus.BLOCKED, reason))
        if d.confidence < self.params.min_confidence:
            low = (
                f"confidence {d.confidence:.2f} is below min_confidence "
                f"{self.params.min_confidence:.2f}"
            )
            return lambda row: (row.finish(Outcome.ESCALATED), _End(RunStatus.ESCALATED, low))
        problem = self._unsafe(d, snap)
        if problem:
            return lambda row: (
                row.finish(Outcome.ESCALATED, error=problem),
                _End(RunStatus.ESCALATED, problem),
            )
        return None

    def _unsafe(self, d: Decision, snap: Snapshot) -> str | None:  # noqa: PLR0911 - one return per case
        """Why this decision cannot be acted on safely, or None when it can."""
        target = snap.candidate(d.target)
        if d.target == NONE:
            return "the decider chose no target but reported neither done nor blocked"
        if target is None:
            return f"the decider chose {d.target!r}, which is not on this screen"
        if target.kind.fillable and d.input != NONE and self.inputs.get(d.input) is None:
            return f"the decider chose input {d.input!r}, which the caller did not supply"
        if target.kind.fillable and d.input == NONE:
            return f"the decider chose text field {target.name!r} but no input to type"
        if self._secret_into_plain_field(d, target):
            return (
                f"the decider chose secret input {d.input!r} for {target.name!r}, which is not a "
                "secure field; secrets are typed only into secure fields"
            )
        if self._is_dangerous(target):
            return f"{target.name!r} matches the dangerous-controls guard; a person must decide"
        return None

    def _secret_into_plain_field(self, d: Decision, target: Candidate) -> bool:
        value = self.inputs.get(d.input)
        return (
            value is not None
            and value.sensitive
            and target.kind.fillable
            and target.kind is not Kind.SECURE_TEXT_FIELD
        )

    def _is_dangerous(self, c: Candidate) -> bool:
        return self.dangerous is not None and self.dangerous.search(c.name) is not None

    def _act(self, row: _Row, snap: Snapshot, d: Decision, target: Candidate) -> Step:
        pinned = snap.pin(target.ref)
        value = self.inputs.get(d.input) if target.kind.fillable else None
        if value is not None:
            row.action = Action(
                kind=ActionKind.FILL,
                ref=target.ref,
                pinned=pinned,
                input=value.name,
                shown_value=value.shown(),
            )
        else:
            row.action = Action(kind=ActionKind.PRESS, ref=target.ref, pinned=pinned)
        t2 = self.clock()
        try:
            if value is not None:
                row.result = result = self._retrying(lambda: self.device.fill(pinned, value))
            else:
                row.result = result = self._retrying(lambda: self.device.press(pinned))
        except StaleRefError as exc:
            row.action_ms = (self.clock() - t2) * 1000
            return self._stale(row, exc)
        except DeviceError as exc:
            row.action_ms = (self.clock() - t2) * 1000
            return row.finish(Outcome.ERRORED, error=str(exc)), _device_end(exc)
        row.action_ms = (self.clock() - t2) * 1000
        self.stale = 0
        if value is not None and value.name not in self.used_inputs:
            self.used_inputs.append(value.name)
        verb = f"filled {value.name} into" if value is not None else "pressed"
        what = target.name or target.ref
        if result.changed:
            self.unproductive = 0
            self.history.append(f"{row.index}: {verb} {what}; screen changed")
            return row.finish(Outcome.ACTED), None
        self.unproductive += 1
        self.history.append(f"{row.index}: {verb} {what}; nothing changed")
        limit = self.params.max_unproductive
        if self.unproductive > limit:
            why = f"{self.unproductive} actions in a row changed nothing (max_unproductive={limit})"
            return row.finish(Outcome.UNPRODUCTIVE), _End(RunStatus.BLOCKED, why)
        return row.finish(Outcome.UNPRODUCTIVE), None

    def _stale(self, row: _Row, exc: StaleRefError) -> Step:
        self.stale += 1
        ref = row.action.ref if row.action else "?"
        self.history.append(f"{row.index}: {ref} was stale; re-snapshot")
        stepped = row.finish(Outcome.STALE, error=f"stale ref: {exc.reason}")
        if self.stale >= MAX_STALE_IN_A_ROW:
            return stepped, _End(
                RunStatus.ERRORED, f"refs went stale {self.stale} times in a row", exc
            )
        return stepped, None

    # -- the run: the one place rows are recorded --------------------------------------------

    def run(self, on_step: StepHook | None) -> RunResult:
        started = self.clock()
        steps: list[StepRow] = []
        end = _End(RunStatus.MAX_STEPS, f"max_steps={self.params.max_steps} reached")
        for index in range(1, self.params.max_steps + 1):
            if self.should_cancel is not None and self.should_cancel():
                end = _End(RunStatus.CANCELLED, "cancelled by the caller")
                break
            row, ended = self.step(index)
            steps.append(row)
            if on_step is not None:
                on_step(row)
            if ended is not None:
                end = ended
                break
        error = end.error
        return RunResult(
            status=end.status,
            reason=end.reason,
            goal=self.goal,
            steps=tuple(steps),
            error=None
            if error is None
            else ErrorInfo(
                type=type(error).__name__,
                code=error.code,
                message=str(error),
                device_fault=error.device_fault,
            ),
            totals=totals(steps),
            duration_ms=(self.clock() - started) * 1000,
        )


def totals(steps: tuple[StepRow, ...] | list[StepRow]) -> PhaseTotals:
    """Phase durations and token usage summed over a run's rows: the one totals function."""
    return PhaseTotals(
        snapshot_ms=round(sum(s.snapshot_ms for s in steps), 3),
        decide_ms=round(sum(s.decide_ms for s in steps), 3),
        action_ms=round(sum(s.action_ms for s in steps), 3),
        input_tokens=sum(s.decision.usage.input_tokens for s in steps if s.decision),
        output_tokens=sum(s.decision.usage.output_tokens for s in steps if s.decision),
    )


def _word_pattern(words: tuple[str, ...]) -> re.Pattern[str] | None:
    alternatives = "|".join(re.escape(w.strip()) for w in words if w.strip())
    return re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE) if alternatives else None


def run_goal(
    device: DevicePort,
    goal: str,
    *,
    decider: Decider,
    inputs: Inputs | None = None,
    params: RunParams = DEFAULT_PARAMS,
    on_step: StepHook | None = None,
    should_cancel: CancelCheck | None = None,
    dangerous: tuple[str, ...] = DEFAULT_DANGEROUS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Run `goal` on `device` until it is done, blocked, escalated, errored, cancelled or out of
    steps. Never acts on a ref that is not in the current snapshot, never types text that was
    not supplied in `inputs`, and always ends within `params.max_steps` steps, one row each."""
    return _Run(
        device=device,
        goal=goal,
        decider=decider,
        inputs=inputs or Inputs(),
        params=params,
        should_cancel=should_cancel,
        dangerous=_word_pattern(dangerous),
        sleep=sleep,
        clock=clock,
    ).run(on_step)
