"""`run_journey`: a journey's steps in order on one device in one run.

A journey (`GoalRunRequest.steps`) is a path through the app: goal steps (the step loop,
`run_goal`, with the step's own inputs, `done_when` and `max_steps`), checks (plain text
decided by the rules; natural language asked of the decider as one narrow yes/no question
that holds only on evidence it cites from the screen), and plain steps that need no decider
(press, fill, scroll, back, launch, relaunch, open, wait, submit).

Every step records its rows (numbered on from the step before, each carrying the step's index,
title and who decided it: `StepRow.journey_step`, `.journey_name`, `.source`) and pictures; the
run's status is the first step that did not pass, its reason names that step. A device that
cannot do a device action a step needs refuses the journey before the first step
(`refusal`), never halfway.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workers.core.chain import Tier, decide_end
from workers.core.cost import Budget, Ledger, PriceTable, metered
from workers.core.errors import (
    BudgetExceededError,
    DecideError,
    DeviceError,
    GoalfleetError,
    StaleRefError,
)
from workers.core.guards import Guards
from workers.core.loop import CancelCheck, StepHook, run_goal
from workers.core.memory import DecisionMemory, Remembered, Target, memory_key, normalise_goal
from workers.core.model import (
    NONE,
    Action,
    ActionKind,
    ActionResult,
    Attempt,
    Candidate,
    DecideState,
    Decision,
    ErrorInfo,
    Inputs,
    JourneyStepResult,
    MemoryNote,
    MemorySource,
    Outcome,
    RunResult,
    RunStatus,
    Snapshot,
    StepRow,
    StepSource,
)
from workers.core.params import DEFAULT_PARAMS, RunParams
from workers.core.ports import Decider, DeviceAction, DevicePort
from workers.core.projection import kind_of
from workers.core.request import PLAIN_CHECK, GoalRunRequest, JourneyStep
from workers.core.rows import End, Row, action_on, device_end, retry_transient, totals
from workers.core.shots import Camera, ShotSession
from workers.core.video import Videographer
from workers.core.words import DEFAULT_DANGEROUS, shown

__all__ = [
    "check_question",
    "in_view",
    "on_screen",
    "refusal",
    "row_source",
    "run_journey",
    "step_headings",
]

MAX_STALE = 3
"""Stale refs in a row a plain press or fill tries again after (a fresh snapshot each)."""
_RANK: dict[StepSource, int] = {
    "": 0,
    "plain": 1,
    "rules": 2,
    "memory": 3,
    "model": 4,
    "person": 5,
}
"""A step's label is its costliest row's: a goal step decided from memory whose last row is
its `done_when` (rules) is a `memory` step; one model call makes it a `model` step."""
_BY: dict[str, StepSource] = {"rules": "rules", "human": "person", "memory": "memory"}
_REMEMBERED: dict[StepSource, MemorySource] = {"person": "human", "model": "model"}
"""A check that held, remembered as who answered it (anything else: the rules)."""
_QUOTED = re.compile("[\"'\u201c\u2018]([^\"'\u201d\u2019]{2,200})[\"'\u201d\u2019]")
_ACTIONS: dict[str, DeviceAction] = {
    k: k for k in ("scroll", "back", "launch", "relaunch", "open", "submit", "wait")
}


def row_source(row: StepRow) -> StepSource:
    """Who decided a loop row: the memory, a person, the rules (a rules decider, or
    `done_when` with no decider asked), else a model (a scripted decider stands in for one)."""
    if row.memory is not None and row.memory.outcome == "hit":
        return "memory"
    if row.decision is None:
        return ""
    if row.seen is None:
        return "rules"  # done_when: the screen said so, no decider was asked
    return _BY.get(row.decision.decided_by, "model")


def step_headings(result: RunResult | None, rows: Sequence[StepRow]) -> dict[int, str]:
    """A journey's step headings for reports and the console, by the index of each step's
    first row: the step's title, who decided it, and (once the run ended) whether it passed
    or why not. {} for a one-goal run."""
    steps = {j.index: j for j in (result.journey if result is not None else ())}
    out, current = {}, 0
    for row in rows:
        if row.journey_step and row.journey_step != current:
            current = row.journey_step
            j = steps.get(current)
            went = "" if j is None else " — passed" if j.passed else f" — failed: {j.why}"
            who = (j.source if j is not None else row.source) or "plain"
            out[row.index] = f"step {current}: {row.journey_name} ({who}){went}"
    return out


def refusal(device: DevicePort, steps: Sequence[JourneyStep]) -> str:
    """Why `device` cannot run this journey ("" when it can): the first step needing a device
    action it lacks, with the device's reason."""
    for i, step in enumerate(steps, start=1):
        action = _ACTIONS.get(step.kind)
        if action is not None and (why := device.action_refusal(action)):
            return f"step {i} ({step.title(i)}) needs {action}, and {why}"
    return ""


def check_question(text: str) -> str:
    """The one narrow question a natural-language check asks the decider."""
    return (
        f"Check, do not act: is this true of the screen now: {text}? Answer done=true only "
        "if it is, citing the element it rests on as target (or quoting the on-screen text "
        "in the reason); otherwise done=false. Press nothing."
    )


@dataclass(frozen=True)
class _Verdict:
    """How one step ended: passed, or the run's status and why not."""

    passed: bool
    why: str = ""
    status: RunStatus = RunStatus.DONE
    error: ErrorInfo | None = None
    """What failed, as the run's result says it (an infrastructure failure only)."""


_PASS = _Verdict(passed=True)


def _fail(why: str, status: RunStatus = RunStatus.BLOCKED) -> _Verdict:
    return _Verdict(passed=False, why=why, status=status)


@dataclass
class _Journey:
    device: DevicePort
    goal: str
    steps: tuple[JourneyStep, ...]
    chain: tuple[Tier, ...]
    """The run's decider, then its `escalate_to`, under the run's one meter (`metered`): its
    goal steps and its checks spend from one budget."""
    inputs: Inputs
    base_inputs: frozenset[str]
    """The journey's own input names (every goal step may type them)."""
    params: RunParams
    memory: DecisionMemory | None
    camera: Camera | None
    on_step: StepHook | None
    should_cancel: CancelCheck | None
    dangerous: tuple[str, ...]
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    rows: list[StepRow] = field(default_factory=list)
    writes: int = 0
    shots: ShotSession | None = None

    # -- the journey ------------------------------------------------------------------------

    def run(self) -> RunResult:
        started = self.clock()
        if self.camera is not None:
            self.shots = self.camera.session(self.device, self.inputs, self.clock)
        done: list[JourneyStepResult] = []
        failed: _Verdict | None = None
        why = ""
        refused = refusal(self.device, self.steps)
        if refused:
            failed, why = _fail(refused, RunStatus.ERRORED), refused
        for i, step in enumerate(self.steps, start=1):
            if failed is not None:
                break
            if self.should_cancel is not None and self.should_cancel():
                failed = _fail("cancelled by the caller", RunStatus.CANCELLED)
                why = failed.why
                break
            t0, before = self.clock(), len(self.rows)
            try:
                verdict = self._step(i, step)
            except DeviceError as exc:
                end = device_end(exc)
                info = self._info(exc)
                verdict = _Verdict(passed=False, why=end.reason, status=end.status, error=info)
            mine = self.rows[before:]
            sources = [r.source for r in mine] or ["plain"]
            done.append(
                JourneyStepResult(
                    index=i,
                    title=step.title(i),
                    kind=step.kind,
                    passed=verdict.passed,
                    why=self.inputs.scrub(verdict.why),
                    source=max(sources, key=lambda s: _RANK[s]),
                    rows=len(mine),
                    decider_calls=sum(r.source == "model" for r in mine),
                    ms=round((self.clock() - t0) * 1000, 3),
                )
            )
            if not verdict.passed:
                failed = verdict
                why = f"step {i} ({step.title(i)}) did not pass: {verdict.why}"
        done += [
            JourneyStepResult(index=i, title=s.title(i), kind=s.kind)
            for i, s in enumerate(self.steps, start=1)
            if i > len(done)
        ]
        error = failed.error if failed is not None else None
        if refused:
            error = ErrorInfo(type="UnsupportedActionError", code="UNSUPPORTED_ACTION", message=why)
        return RunResult(
            status=RunStatus.DONE if failed is None else failed.status,
            reason=self.inputs.scrub(why or f"all {len(self.steps)} steps passed"),
            goal=self.goal,
            steps=tuple(self.rows),
            error=error,
            totals=totals(self.rows),
            duration_ms=(self.clock() - started) * 1000,
            memory_writes=self.writes,
            journey=tuple(done),
        )

    def _step(self, i: int, step: JourneyStep) -> _Verdict:  # noqa: PLR0911 - one per kind
        if step.goal is not None:
            return self._goal(i, step, step.goal)
        if step.check is not None:
            return self._check(i, step, step.check)
        if step.press is not None:
            return self._press(i, step, step.press)
        if step.fill is not None:
            return self._fill(i, step, step.fill.field, step.fill.input)
        if step.scroll is not None:
            return self._scroll(i, step)
        if step.wait is not None:
            return self._wait(i, step, step.wait.for_, step.wait.timeout_s)
        if step.open is not None:
            link = step.open
            return self._act(i, step, ActionKind.OPEN, lambda: self.device.open_link(link))
        if step.back:
            return self._act(i, step, ActionKind.BACK, self.device.back)
        if step.submit:
            return self._act(i, step, ActionKind.SUBMIT, self.device.submit)
        relaunch = step.relaunch
        kind = ActionKind.RELAUNCH if relaunch else ActionKind.LAUNCH
        return self._act(
            i, step, kind, lambda: self.device.launch(relaunch=relaunch), must_change=False
        )

    # -- rows -------------------------------------------------------------------------------

    def _keep(self, i: int, step: JourneyStep, row: StepRow, source: StepSource) -> None:
        """Record one row of step `i`: numbered on, named, labelled, scrubbed, pictured."""
        row = row.model_copy(
            update={"journey_step": i, "journey_name": step.title(i), "source": source}
        )
        row = self.inputs.scrub_row(row)
        if self.shots is not None and source != "" and row.screenshot is None:
            row = self.shots.keep(row)
        self.rows.append(row)
        if self.on_step is not None:
            self.on_step(row)

    def _row(self) -> Row:
        return Row(len(self.rows) + 1)

    def _look(self, row: Row) -> Snapshot:
        with row.timed("snapshot", self.clock):
            snap = retry_transient(self.device.snapshot, self.sleep)
        row.snap = snap
        if self.shots is not None:
            self.shots.capture(snap)
        return snap

    def _finish(
        self, i: int, step: JourneyStep, row: Row, verdict: _Verdict, source: StepSource
    ) -> _Verdict:
        outcome = Outcome.ACTED if row.result is not None else Outcome.DONE
        if row.result is not None and not row.result.changed:
            outcome = Outcome.UNPRODUCTIVE
        if not verdict.passed:
            outcome = Outcome.ERRORED if verdict.status is RunStatus.ERRORED else Outcome.BLOCKED
        self._keep(i, step, row.finish(outcome, error=verdict.why or None), source)
        return verdict

    # -- goal steps: the loop ---------------------------------------------------------------

    def _goal(self, i: int, step: JourneyStep, goal: str) -> _Verdict:
        mine = self.base_inputs | set(step.inputs) | set(step.secrets)
        inputs = Inputs(values=tuple(v for v in self.inputs.values if v.name in mine))
        params = self.params.model_copy(
            update={
                "done_when": step.done_when or self.params.done_when,
                "max_steps": step.max_steps or self.params.max_steps,
            }
        )
        offset = len(self.rows)

        def kept(row: StepRow) -> None:
            row = row.model_copy(update={"index": offset + row.index})
            self._keep(i, step, row, row_source(row) or "plain")

        first, *rest = self.chain
        result = run_goal(  # metered already: no prices or budget of its own
            self.device,
            goal,
            decider=first.decider,
            escalate_to=rest,
            decider_name=first.name,
            inputs=inputs,
            params=params.model_copy(update={"budget_tokens": None, "budget_cost": None}),
            on_step=kept,
            should_cancel=self.should_cancel,
            dangerous=self.dangerous,
            memory=self.memory,
            camera=self.camera,
            sleep=self.sleep,
            clock=self.clock,
        )
        self.writes += result.memory_writes
        if result.status is RunStatus.DONE:
            return _PASS
        why = f"{result.status.value}: {result.reason}"
        return _Verdict(passed=False, why=why, status=result.status, error=result.error)

    # -- checks -----------------------------------------------------------------------------

    def _check(self, i: int, step: JourneyStep, text: str) -> _Verdict:
        row = self._row()
        snap = self._look(row)
        plain = PLAIN_CHECK.fullmatch(text)
        if plain is not None:
            wanted, negated = plain.group("text"), bool(plain.group("not"))
            shows = on_screen(snap, wanted)
            said = f"{wanted!r} is {'' if shows else 'not '}visible"
            row.decision = Decision(done=shows != negated, reason=said[:200], decided_by="rules")
            verdict = _PASS if shows != negated else _fail(said)
            return self._finish(i, step, row, verdict, "rules")
        return self._ask(i, step, row, snap, text)

    def _ask(self, i: int, step: JourneyStep, row: Row, snap: Snapshot, text: str) -> _Verdict:
        """A natural-language check: from memory when this screen answered it before, else
        one narrow yes/no question to the decider; it holds only on cited on-screen evidence."""
        state = self.inputs.scrub_state(
            DecideState(
                goal=check_question(text),
                step=row.index,
                candidates=snap.candidates,
                context=snap.context,
                input_names=(),
                screen=snap.screen,
            )
        )
        row.seen = state
        key = memory_key(state, self.memory.decider) if self.memory is not None else ""
        entry = self.memory.recall(key) if self.memory is not None else None
        if entry is not None and entry.done and _still_cited(entry, snap):
            row.memory = MemoryNote(entry=key, outcome="hit", source=entry.source)
            row.decision = Decision(
                done=True, reason="remembered: it held on this screen", decided_by="memory"
            )
            return self._finish(i, step, row, _PASS, "memory")
        if self.memory is not None:
            row.memory = MemoryNote(entry=key, outcome="miss")
        decision, why, failed = self._asked(row, state, snap)
        if decision is None:
            status = failed.status if failed is not None else RunStatus.ERRORED
            error = self._info(failed.error) if failed and failed.error else None
            verdict = _Verdict(passed=False, why=why, status=status, error=error)
            return self._finish(i, step, row, verdict, "model")
        row.decision = decision
        source = _BY.get(decision.decided_by, "model")
        if why:
            return self._finish(i, step, row, _fail(why[:300]), source)
        if self.memory is not None:
            self.writes += self.memory.remember(
                [
                    Remembered(
                        key=key,
                        target=Target.of(snap.candidates, decision.target),
                        done=True,
                        source=_REMEMBERED.get(source, "rules"),
                        origin=row.attempts[-1].decider if row.attempts else self.chain[0].name,
                        goal=normalise_goal(state.goal),
                        screen=state.screen,
                    )
                ]
            )
        return self._finish(i, step, row, _PASS, source)

    def _asked(
        self, row: Row, state: DecideState, snap: Snapshot
    ) -> tuple[Decision | None, str, End | None]:
        """The check's answer: each decider of the chain in turn (the run's, then its
        `escalate_to`) until one answers with confidence and, for a yes, cites evidence on
        the screen. (the answer, why it does not hold ("" when it holds), how the run ends
        when no decider answered: `over-budget` for a call the run's budget refused)."""
        attempts: list[Attempt] = []
        answer: tuple[Decision | None, str, End | None] = (None, "", None)
        for tier in self.chain:
            name = tier.name
            t0 = self.clock()
            try:
                with row.timed("decide", self.clock):
                    decision = tier.decider.decide(state)
            except DecideError as exc:
                ms = (self.clock() - t0) * 1000
                attempts.append(Attempt(decider=name, ms=ms, escalated=str(exc)[:200]))
                _, end = decide_end(exc)
                if isinstance(exc, BudgetExceededError):  # one budget: the rest refuse too
                    answer = (None, str(exc), end)
                    break
                answer = (None, f"the decider failed: {exc}", end)
                continue
            ms = (self.clock() - t0) * 1000
            if decision.confidence < self.params.min_confidence:
                why = f"not sure ({decision.confidence:.2f})"
            elif not decision.done:
                why = f"not so: {decision.reason}"
            elif not _evidence(decision, snap):
                why = "the decider said it holds but cited nothing on the screen"
            else:
                why = ""
            answer = (decision, why, None)
            settled = not why or why.startswith("not so")  # a sure no is an answer
            attempts.append(
                Attempt(decider=name, decision=decision, ms=ms, escalated="" if settled else why)
            )
            if settled:
                break
        row.attempts = tuple(attempts) if len(attempts) > 1 else ()
        return answer

    # -- plain steps ------------------------------------------------------------------------

    def _press(self, i: int, step: JourneyStep, name: str) -> _Verdict:
        return self._on(i, step, name, fill=None)

    def _fill(self, i: int, step: JourneyStep, name: str, input_name: str) -> _Verdict:
        value = self.inputs.get(input_name)
        if value is None:
            row = self._row()
            self._look(row)
            why = f"no input named {input_name!r} was supplied; add it to the flow's inputs"
            return self._finish(i, step, row, _fail(why), "plain")
        return self._on(i, step, name, fill=input_name)

    def _on(self, i: int, step: JourneyStep, name: str, *, fill: str | None) -> _Verdict:
        """Press (or fill) the control named `name`; a stale ref: a fresh look, up to
        `MAX_STALE` times."""
        for _ in range(MAX_STALE):
            row = self._row()
            snap = self._look(row)
            target = _named(snap.candidates, name, fillable=fill is not None)
            if target is None:
                names = ", ".join(repr(c.name) for c in snap.candidates) or "none"
                what = "text field" if fill is not None else "control"
                why = f"no {what} named {name!r} on this screen (its controls: {names})"
                return self._finish(i, step, row, _fail(why[:400]), "plain")
            value = self.inputs.get(fill) if fill is not None else None
            asked = Decision(target=target.ref, input=fill or NONE)
            if refused := Guards(self.inputs, None).unsafe(asked, snap, by_caller=True):
                why = refused.replace("the decider chose", "the step names")
                return self._finish(i, step, row, _fail(why), "plain")
            if value is not None and value.sensitive and self.shots is not None:
                self.shots.filled_secret(snap, target.ref)
            row.action = action_on(snap, target, value)
            pinned = row.action.pinned
            act = (
                functools.partial(self.device.fill, pinned, value)
                if value is not None
                else functools.partial(self.device.press, pinned)
            )
            try:
                with row.timed("action", self.clock):
                    row.result = self._retrying(act)
            except StaleRefError as exc:
                self._keep(i, step, row.finish(Outcome.STALE, error=str(exc)), "plain")
                continue
            if not row.result.changed:
                verb = "filling" if value is not None else "pressing"
                return self._finish(
                    i, step, row, _fail(f"{verb} {name!r} changed nothing"), "plain"
                )
            return self._finish(i, step, row, _PASS, "plain")
        return _fail(f"{name!r} went stale {MAX_STALE} times in a row", RunStatus.ERRORED)

    def _act(
        self,
        i: int,
        step: JourneyStep,
        kind: ActionKind,
        call: Callable[[], ActionResult],
        *,
        must_change: bool = True,
    ) -> _Verdict:
        row = self._row()
        self._look(row)  # the screen it acted on, and its picture
        row.action = Action(kind=kind, ref="", pinned="")
        with row.timed("action", self.clock):
            row.result = self._retrying(call)
        if must_change and not row.result.changed:
            return self._finish(i, step, row, _fail(f"{kind.value} changed nothing"), "plain")
        return self._finish(i, step, row, _PASS, "plain")

    def _scroll(self, i: int, step: JourneyStep) -> _Verdict:
        spec = step.scroll
        if spec is None:  # the caller checked
            raise AssertionError("a scroll step without its scroll")
        until, direction = spec.until, spec.direction
        for n in range(spec.max + 1):
            row = self._row()
            snap = self._look(row)
            if until is not None and in_view(snap, until):
                row.decision = Decision(done=True, reason=f"{until!r} is visible"[:200])
                return self._finish(i, step, row, _PASS, "plain")
            if n == spec.max:
                why = f"{until!r} not visible after {spec.max} scrolls {direction}"
                return self._finish(i, step, row, _fail(why), "plain")
            row.action = Action(kind=ActionKind.SCROLL, ref="", pinned="", direction=direction)
            with row.timed("action", self.clock):
                row.result = self._retrying(lambda: self.device.scroll(direction))
            if not row.result.changed:
                end = f"; {until!r} is not in it" if until is not None else ""
                why = f"scrolling {direction} changed nothing (the content ends there){end}"
                return self._finish(i, step, row, _fail(why), "plain")
            if until is None:
                return self._finish(i, step, row, _PASS, "plain")
            self._keep(i, step, row.finish(Outcome.ACTED), "plain")
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, i: int, step: JourneyStep, text: str, timeout_s: float) -> _Verdict:
        row = self._row()
        row.action = Action(kind=ActionKind.WAIT, ref="", pinned="")
        with row.timed("action", self.clock):
            seen = self.device.wait(text, timeout_s)
        self._look(row)
        if not seen:
            return self._finish(
                i, step, row, _fail(f"{text!r} did not appear within {timeout_s:g} s"), "plain"
            )
        row.decision = Decision(done=True, reason=f"{text!r} is visible"[:200])
        return self._finish(i, step, row, _PASS, "plain")

    def _info(self, exc: GoalfleetError) -> ErrorInfo:
        """A failure as the result says it (scrubbed: a device's message may echo a value)."""
        return ErrorInfo(
            type=type(exc).__name__,
            code=exc.code,
            message=self.inputs.scrub(str(exc)),
            device_fault=exc.device_fault,
        )

    def _retrying(self, call: Callable[[], ActionResult]) -> ActionResult:
        return retry_transient(call, self.sleep)


def _named(candidates: tuple[Candidate, ...], name: str, *, fillable: bool) -> Candidate | None:
    """The candidate named `name` (case-insensitive; else the one whose name holds it)."""
    fits = [c for c in candidates if c.kind.fillable == fillable or not fillable]
    wanted = name.casefold()
    exact = [c for c in fits if c.name.casefold() == wanted]
    if exact:
        return exact[0]
    holding = [c for c in fits if wanted in c.name.casefold()]
    return holding[0] if len(holding) == 1 else None


def _controls_in_view(snap: Snapshot) -> tuple[str, ...]:
    """The names of the screen's controls that are on it (hittable, or not reported), enabled
    or not."""
    names = [c.name for c in snap.candidates]
    names += [n.label for n in snap.nodes if kind_of(n).interactive and n.hittable is not False]
    return tuple(n for n in names if n)


def on_screen(snap: Snapshot, text: str) -> bool:
    """Whether `text` is on the screen, for a check: its static texts (`Snapshot.shows`, the
    one predicate) or the name of a control on it (a check may name a button)."""
    return snap.shows(text) or shown(text, _controls_in_view(snap))


def in_view(snap: Snapshot, text: str) -> bool:
    """Whether `text` is on the screen now, for `scroll until`: the name of a control on
    screen, or a static text while the device reports no control out of view. AT-SPI reports
    the rows of a scrolled list that are out of view (not hittable), and static texts carry
    no such flag: with a row out of view, a text may be too."""
    if shown(text, _controls_in_view(snap)):
        return True
    out_of_view = any(kind_of(n).interactive and n.hittable is False for n in snap.nodes)
    return not out_of_view and snap.shows(text)


def _evidence(decision: Decision, snap: Snapshot) -> str:
    """What on the screen the decision cites ("" for nothing): its target, a ref of this
    screen, or a text it quotes that the screen shows."""
    if decision.target != NONE:
        c = snap.candidate(decision.target)
        if c is not None:
            return c.name or c.ref
    for match in _QUOTED.finditer(decision.reason):
        if on_screen(snap, match.group(1)):
            return match.group(1)
    return ""


def _still_cited(entry: Remembered, snap: Snapshot) -> bool:
    """A remembered check's cited element is on this screen (a quote: the screen's key holds
    its texts already)."""
    return entry.target is None or entry.target.find(snap.candidates) is not None


def run_journey(
    device: DevicePort,
    goal: str,
    *,
    steps: Sequence[JourneyStep],
    decider: Decider,
    escalate_to: Sequence[Tier] = (),
    decider_name: str = "",
    inputs: Inputs | None = None,
    base_inputs: frozenset[str] | None = None,
    params: RunParams = DEFAULT_PARAMS,
    on_step: StepHook | None = None,
    should_cancel: CancelCheck | None = None,
    dangerous: tuple[str, ...] = DEFAULT_DANGEROUS,
    memory: DecisionMemory | None = None,
    camera: Camera | None = None,
    prices: PriceTable | None = None,
    suite_budget: Budget | None = None,
    ledger: Ledger | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Run `steps` in order on `device` (see the module's docstring). `inputs`: every input of
    the journey; `base_inputs`: the names every goal step may type (default: all of them);
    the rest of `run_goal`'s arguments as there, given to each goal step. The run's budget
    (`params.budget_tokens` / `budget_cost`) and its suite's (kept in `ledger`) hold for the
    whole journey: its goal steps and its natural-language checks spend from one meter, each
    call priced by `prices`."""
    given = inputs or Inputs()
    return _Journey(
        device=device,
        goal=goal,
        steps=tuple(steps),
        chain=metered(
            (
                Tier(decider_name or (memory.decider if memory else "decider"), decider),
                *escalate_to,
            ),
            params,
            prices,
            suite_budget,
            ledger,
        ),
        inputs=given,
        base_inputs=frozenset(given.names()) if base_inputs is None else base_inputs,
        params=params,
        memory=memory,
        camera=camera,
        on_step=on_step,
        should_cancel=should_cancel,
        dangerous=dangerous,
        sleep=sleep,
        clock=clock,
    ).run()


JOURNEY_NO_VIDEO = "a journey keeps no video yet: its steps' pictures are the sequence"


def run_request(
    device: DevicePort,
    request: GoalRunRequest,
    *,
    decider: Decider,
    video: Videographer | None = None,
    **loop: Any,  # noqa: ANN401 - the rest of `run_goal`'s (and `run_journey`'s) arguments
) -> RunResult:
    """The run `request` asks for, on `device`: its journey, or its one goal (with `video`),
    with its parameters, its decider's name and its suite's budget; the one place a worker
    and `goalfleet run` turn a request into a loop. A journey asked to keep a video says why
    it has none."""
    given = {
        "decider": decider,
        "decider_name": request.decider,
        "params": request.run_params(),
        "suite_budget": request.suite_budget,
        **loop,
    }
    if not request.steps:
        return run_goal(device, request.goal, video=video, **given)
    base = frozenset({*request.inputs, *request.secrets})
    result = run_journey(device, request.goal, steps=request.steps, base_inputs=base, **given)
    if video is not None and video.mode != "off":
        return result.model_copy(update={"video_note": JOURNEY_NO_VIDEO})
    return result
