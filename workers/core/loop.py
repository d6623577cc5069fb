"""`run_goal`: the goal-driven step loop.

Each step: snapshot → (done_when?) → decide → press/fill the chosen ref pinned to the snapshot's
generation, with settle → read "did anything change" from the settle diff → one `StepRow`.
Every iteration writes exactly one row and counts against `max_steps`, so the loop always ends.

This module imports only the model, the errors and the two ports (checked by import-linter).
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
from workers.core.ports import Decider, DevicePort

DEFAULT_MAX_STEPS = 12
"""A sign-in is 4-6 actions (fill, next, fill, sign in, maybe a consent); 12 leaves room for a
stale-ref re-snapshot or two and a code screen, and still stops a wandering run quickly."""
DEFAULT_MIN_CONFIDENCE = 0.5
"""Below an even bet the decider is guessing; a person should look (escalated)."""
DEFAULT_MAX_UNPRODUCTIVE = 2
"""Two actions in a row that change nothing are tolerated (a slow screen, a no-op tap);
the third means pressing harder will not help (blocked)."""
MAX_STALE_IN_A_ROW = 3
"""Consecutive stale-ref steps before the run ends `errored`: the screen will not hold still."""
TRANSIENT_RETRIES = 3
"""Retries of one device call on `TransientDeviceError`, with exponential backoff."""
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 1.0
HISTORY_LINES = 4
DEFAULT_DANGEROUS = ("delete", "purchase", "buy", "pay", "erase", "transfer", "unsubscribe")
"""Words that make a control dangerous: choosing it escalates instead of pressing. Matched as
whole words, case-insensitively ("Pay now" is dangerous, "Display" is not)."""

_T = TypeVar("_T")
StepHook = Callable[[StepRow], None]
CancelCheck = Callable[[], bool]


class _Ended(Exception):  # noqa: N818 - control flow inside this module, never escapes it
    def __init__(self, status: RunStatus, reason: str, error: GoalfleetError | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.error = error


@dataclass
class _Run:
    device: DevicePort
    goal: str
    decider: Decider
    inputs: Inputs
    max_steps: int
    min_confidence: float
    max_unproductive: int
    done_when: str | None
    on_step: StepHook | None
    should_cancel: CancelCheck | None
    dangerous: re.Pattern[str] | None
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    steps: list[StepRow] = field(default_factory=list)
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

    # -- one step ---------------------------------------------------------------------------

    def step(self, index: int) -> None:
        t0 = self.clock()
        snap = self._retrying(self.device.snapshot)
        t1 = self.clock()
        row = _RowBuilder(index=index, snap=snap, snapshot_ms=(t1 - t0) * 1000)

        if self.done_when and snap.shows(self.done_when):
            self._record(row.done(f"done_when {self.done_when!r} is visible"))
            raise _Ended(RunStatus.DONE, f"{self.done_when!r} is visible")

        decision = self._decide(snap, index, row)
        row.decide_ms = (self.clock() - t1) * 1000
        row.decision = decision
        self._judge(decision, snap, row)

        target = snap.candidate(decision.target)
        if target is None:  # _judge guarantees this; kept for the type checker
            raise AssertionError("judged decision has no target")
        action = self._action_for(decision, target, snap)
        row.action = action
        t2 = self.clock()
        try:
            result = self._act(action)
        except StaleRefError as exc:
            row.action_ms = (self.clock() - t2) * 1000
            self.stale += 1
            self._record(row.finish(Outcome.STALE, error=f"stale ref: {exc.reason}"))
            self.history.append(f"{index}: {action.ref} was stale; re-snapshot")
            if self.stale >= MAX_STALE_IN_A_ROW:
                raise _Ended(
                    RunStatus.ERRORED, f"refs went stale {self.stale} times in a row", exc
                ) from None
            return
        row.action_ms = (self.clock() - t2) * 1000
        row.result = result
        self.stale = 0
        if action.input is not None and action.input not in self.used_inputs:
            self.used_inputs.append(action.input)
        verb = f"filled {action.input} into" if action.kind is ActionKind.FILL else "pressed"
        if result.changed:
            self.unproductive = 0
            self._record(row.finish(Outcome.ACTED))
            self.history.append(f"{index}: {verb} {target.name or action.ref}; screen changed")
            return
        self.unproductive += 1
        self._record(row.finish(Outcome.UNPRODUCTIVE))
        self.history.append(f"{index}: {verb} {target.name or action.ref}; nothing changed")
        if self.unproductive > self.max_unproductive:
            raise _Ended(
                RunStatus.BLOCKED,
                f"{self.unproductive} actions in a row changed nothing "
                f"(max_unproductive={self.max_unproductive})",
            )

    def _decide(self, snap: Snapshot, index: int, row: _RowBuilder) -> Decision:
        state = DecideState(
            goal=self.goal,
            step=index,
            candidates=snap.candidates,
            context=snap.context,
            input_names=self.inputs.names(),
            used_inputs=tuple(self.used_inputs),
            history=tuple(self.history[-HISTORY_LINES:]),
            done_when=self.done_when,
            screen=snap.screen,
        )
        try:
            return self.decider.decide(state)
        except DecisionInvalidError as exc:
            self._record(row.finish(Outcome.ESCALATED, error=str(exc)))
            raise _Ended(RunStatus.ESCALATED, f"no valid decision: {exc}", exc) from None
        except DecideError as exc:
            self._record(row.finish(Outcome.ERRORED, error=str(exc)))
            raise _Ended(RunStatus.ERRORED, f"decider failed: {exc}", exc) from None

    def _judge(self, d: Decision, snap: Snapshot, row: _RowBuilder) -> None:
        """End the run when the decision says so, or when it cannot be acted on safely."""
        if d.done:
            self._record(row.finish(Outcome.DONE))
            raise _Ended(RunStatus.DONE, d.reason or "the decider reports the goal reached")
        if d.blocked:
            self._record(row.finish(Outcome.BLOCKED))
            raise _Ended(RunStatus.BLOCKED, d.reason or "the decider reports it cannot progress")
        if d.confidence < self.min_confidence:
            self._record(row.finish(Outcome.ESCALATED))
            raise _Ended(
                RunStatus.ESCALATED,
                f"confidence {d.confidence:.2f} is below min_confidence {self.min_confidence:.2f}",
            )
        problem = self._unsafe(d, snap)
        if problem:
            self._record(row.finish(Outcome.ESCALATED, error=problem))
            raise _Ended(RunStatus.ESCALATED, problem)

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

    def _action_for(self, d: Decision, target: Candidate, snap: Snapshot) -> Action:
        pinned = snap.pin(target.ref)
        if target.kind.fillable:
            value = self.inputs.get(d.input)
            if value is None:  # _judge guarantees this
                raise AssertionError("judged fill has no input")
            return Action(
                kind=ActionKind.FILL,
                ref=target.ref,
                pinned=pinned,
                input=value.name,
                shown_value=value.shown(),
            )
        return Action(kind=ActionKind.PRESS, ref=target.ref, pinned=pinned)

    def _act(self, action: Action) -> ActionResult:
        if action.kind is ActionKind.FILL:
            value = self.inputs.get(action.input or "")
            if value is None:
                raise AssertionError("fill without a supplied input")
            return self._retrying(lambda: self.device.fill(action.pinned, value))
        return self._retrying(lambda: self.device.press(action.pinned))

    def _record(self, row: StepRow) -> None:
        self.steps.append(row)
        if self.on_step is not None:
            self.on_step(row)

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        started = self.clock()
        status, reason, error = RunStatus.MAX_STEPS, f"max_steps={self.max_steps} reached", None
        try:
            for index in range(1, self.max_steps + 1):
                if self.should_cancel is not None and self.should_cancel():
                    raise _Ended(RunStatus.CANCELLED, "cancelled by the caller")
                self.step(index)
        except _Ended as end:
            status, reason, error = end.status, end.reason, end.error
        except FatalDeviceError as exc:
            status, reason, error = RunStatus.ERRORED, f"device failed: {exc}", exc
        except TransientDeviceError as exc:
            status, reason, error = (
                RunStatus.ERRORED,
                f"device kept failing after {TRANSIENT_RETRIES} retries: {exc}",
                exc,
            )
        except DeviceError as exc:
            status, reason, error = RunStatus.ERRORED, f"device error: {exc}", exc
        return RunResult(
            status=status,
            reason=reason,
            goal=self.goal,
            steps=tuple(self.steps),
            error=None
            if error is None
            else ErrorInfo(type=type(error).__name__, code=error.code, message=str(error)),
            totals=_totals(self.steps),
            duration_ms=(self.clock() - started) * 1000,
        )


@dataclass
class _RowBuilder:
    index: int
    snap: Snapshot
    snapshot_ms: float
    decide_ms: float = 0.0
    action_ms: float = 0.0
    decision: Decision | None = None
    action: Action | None = None
    result: ActionResult | None = None

    def finish(self, outcome: Outcome, error: str | None = None) -> StepRow:
        return StepRow(
            index=self.index,
            screen=self.snap.screen,
            fingerprint=self.snap.fingerprint,
            refs_generation=self.snap.refs_generation,
            candidates=len(self.snap.candidates),
            decision=self.decision,
            action=self.action,
            result=self.result,
            outcome=outcome,
            error=error,
            snapshot_ms=round(self.snapshot_ms, 3),
            decide_ms=round(self.decide_ms, 3),
            action_ms=round(self.action_ms, 3),
        )

    def done(self, reason: str) -> StepRow:
        self.decision = Decision(done=True, reason=reason)
        return self.finish(Outcome.DONE)


def _totals(steps: list[StepRow]) -> PhaseTotals:
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
    max_steps: int = DEFAULT_MAX_STEPS,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    max_unproductive: int = DEFAULT_MAX_UNPRODUCTIVE,
    done_when: str | None = None,
    on_step: StepHook | None = None,
    should_cancel: CancelCheck | None = None,
    dangerous: tuple[str, ...] = DEFAULT_DANGEROUS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Run `goal` on `device` until it is done, blocked, escalated, errored, cancelled or out of
    steps. Never acts on a ref that is not in the current snapshot, never types text that was
    not supplied in `inputs`, and always ends within `max_steps` steps."""
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")
    if not 0.0 <= min_confidence <= 1.0:
        raise ValueError("min_confidence must be between 0 and 1")
    if max_unproductive < 0:
        raise ValueError("max_unproductive must be 0 or more")
    return _Run(
        device=device,
        goal=goal,
        decider=decider,
        inputs=inputs or Inputs(),
        max_steps=max_steps,
        min_confidence=min_confidence,
        max_unproductive=max_unproductive,
        done_when=done_when,
        on_step=on_step,
        should_cancel=should_cancel,
        dangerous=_word_pattern(dangerous),
        sleep=sleep,
        clock=clock,
    ).run()
