"""`run_goal`: the goal-driven step loop.

Each step: snapshot → (done_when?) → decide → press/fill the chosen ref pinned to the snapshot's
generation, with settle → read "did anything change" from the settle diff → one `StepRow`.

"Exactly one row per step" holds by structure: `_Run.step` returns its row and, when the run
ends there, why (`End`); `_Run.run` is the only place that records a row. A step that fails
inside a phase still returns a row, with that phase's real duration.

What the loop will not do twice (a futile press, a second credential submit, a fill a field
already holds) is `workers.core.repeats`, checked after every decider's answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from workers.core.chain import Tier, ask
from workers.core.cost import Budget, Ledger, PriceTable, metered
from workers.core.errors import (
    AppClosedError,
    DeviceError,
    EmptySnapshotError,
    StaleRefError,
)
from workers.core.failure import failure_report, final_screen
from workers.core.guards import Guards
from workers.core.memory import DecisionMemory, Remembered, memory_key, remembered_from
from workers.core.model import (
    Action,
    Candidate,
    DecideState,
    Decision,
    ErrorInfo,
    FailureReport,
    Inputs,
    Kind,
    MemoryNote,
    MemorySource,
    Outcome,
    RunResult,
    RunStatus,
    Snapshot,
    StepRow,
)
from workers.core.moves import Move, chosen, history_line, offered
from workers.core.params import DEFAULT_PARAMS, HISTORY_LINES, RunParams
from workers.core.ports import Decider, DevicePort
from workers.core.projection import kind_of
from workers.core.repeats import Repeats
from workers.core.rows import End, Row, Step, action_on, device_end, retry_transient, totals
from workers.core.shots import Camera, ShotSession
from workers.core.verdicts import Judge
from workers.core.video import Videographer, VideoSession
from workers.core.words import DEFAULT_DANGEROUS, word_pattern

MAX_STALE_IN_A_ROW = 3
"""Consecutive stale-ref steps before the run ends `errored`: the screen will not hold still."""
_SOURCES: dict[str, MemorySource] = {"rules": "rules", "scripted": "scripted", "human": "human"}
"""Who a remembered decision came from, by its `decided_by` (any other: a model)."""

_T = TypeVar("_T")
StepHook = Callable[[StepRow], None]
CancelCheck = Callable[[], bool]


@dataclass
class _Run:
    device: DevicePort
    goal: str
    tiers: tuple[Tier, ...]
    """The decider chain: the first, then each `escalate_to` in turn on an escalation cause."""
    inputs: Inputs
    params: RunParams
    should_cancel: CancelCheck | None
    judge: Judge
    repeats: Repeats
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    memory: DecisionMemory | None = None
    shots: ShotSession | None = None
    """The run's step pictures (`workers.core.shots`); None: the run takes none."""
    video: VideoSession | None = None
    """The run's video (`workers.core.video`); None: the run keeps none."""
    learned: dict[str, Remembered] = field(default_factory=dict)
    """Decisions of this run worth remembering, by key: the last one made on a screen (the one
    that finally left it) wins. Written only if the run ends `done`."""
    seen_keys: set[str] = field(default_factory=set)
    """Memory keys of the screens this run has decided on: a hit on one of them again is a
    remembered detour (a cycle), not progress."""
    history: list[str] = field(default_factory=list)
    used_inputs: list[str] = field(default_factory=list)
    unproductive: int = 0
    stale: int = 0
    arrival: str | None = None
    """The fingerprint of the screen the run started on (`evidence`: a done claim there needs
    a screen that offers no way forward)."""
    last_act: str = ""
    """The run's last action that went through, as "step 3 (pressed 'OK')"."""
    last_snap: Snapshot | None = None
    moves: tuple[Candidate, ...] = ()
    """The moves offered beside each screen's elements (`workers.core.moves`)."""
    futile_moves: set[tuple[str, str]] = field(default_factory=set)
    """(screen fingerprint, move ref): a move that changed nothing there, not offered again."""

    def _retrying(self, call: Callable[[], _T]) -> _T:
        return retry_transient(call, self.sleep)

    # -- one step: snapshot → decide → judge → act ------------------------------------------

    def step(self, index: int) -> Step:
        row = Row(index)
        snap = self._snapshot(row)
        if isinstance(snap, tuple):
            return snap
        done_when = self.params.done_when
        if done_when and snap.shows(done_when):
            row.decision = Decision(done=True, reason=f"done_when {done_when!r} is visible"[:200])
            return row.finish(Outcome.DONE), End(RunStatus.DONE, f"{done_when!r} is visible")
        state = self._state(snap, index)
        if self.memory is not None:
            remembered = self._from_memory(self.memory, row, snap, state)
            if remembered is not None:
                return remembered
            if row.memory is not None and row.memory.outcome == "invalidated":
                snap = self._snapshot(row)  # the remembered action moved nothing: look again
                if isinstance(snap, tuple):
                    return snap
                state = self._state(snap, index)
        return self._decide_and_act(row, snap, state)

    def _snapshot(self, row: Row) -> Snapshot | Step:
        try:
            with row.timed("snapshot", self.clock):
                snap = self._retrying(self.device.snapshot)
        except EmptySnapshotError as exc:
            if not self.last_act:  # nothing done yet: the stack's hint is the right one
                return row.finish(Outcome.ERRORED, error=str(exc)), device_end(exc)
            closed = AppClosedError(
                f"the app's window closed after {self.last_act}",
                hint="it exited or ended its dialog there; its own output or log says why",
            )
            return row.finish(Outcome.ERRORED, error=str(closed)), End(
                RunStatus.ERRORED, closed.message, closed
            )
        except DeviceError as exc:
            return row.finish(Outcome.ERRORED, error=str(exc)), device_end(exc)
        row.snap = self.last_snap = snap
        if self.shots is not None:
            self.shots.capture(snap)  # the screen the decider is about to see
        if self.video is not None:
            self.video.seen(snap)  # paint what holds a secret on it
        if self.arrival is None:
            self.arrival = snap.fingerprint
        ended = self.repeats.seen(snap)
        if ended is not None:  # a credential submit brought up an error: never try again
            row.decision = Decision(blocked=True, reason=ended[:200])
            return row.finish(Outcome.BLOCKED), End(RunStatus.BLOCKED, ended)
        return snap

    def _decide_and_act(self, row: Row, snap: Snapshot, state: DecideState) -> Step:
        row.seen = state
        arrival = self._arrival(snap, state)
        asked = ask(
            self.tiers,
            state,
            snap,
            row=row,
            clock=self.clock,
            escalation=lambda d, s: self.judge.escalation(d, s, state, arrival=arrival),
        )
        if isinstance(asked, tuple):
            return asked
        decision = asked
        move = chosen(decision)
        if move is not None:
            stepped = self._move(row, snap, move)
            if stepped[0].outcome is Outcome.ACTED:
                self._learn(state, decision, row)
            return stepped
        verdict = self.judge.verdict(decision, snap, state, checked=True)  # the chain checked
        if verdict is not None:
            stepped = verdict(row)
            if stepped[0].outcome is Outcome.DONE:
                self._learn(state, decision, row)
            return stepped
        target = snap.candidate(decision.target)
        if target is None:  # _judge returns a verdict for this; kept for the type checker
            raise AssertionError("judged decision has no target")
        refused = self.repeats.refusal(decision, snap)
        if refused is not None:  # nothing is done; the decider reads why in its history
            return self._unproductive(row, f"{row.index}: {refused}", refused)
        stepped = self._act(row, snap, decision, target)
        if stepped[0].outcome is Outcome.ACTED:
            self._learn(state, decision, row)
        return stepped

    # -- decision memory: read before the decider, verify by the settle diff ---------------

    def _from_memory(
        self, memory: DecisionMemory, row: Row, snap: Snapshot, state: DecideState
    ) -> Step | None:
        """The step decided from memory, or None to ask the decider (a miss, a repeat, or a
        remembered action that changed nothing: that entry is invalidated, one action wasted)."""
        key = memory_key(state, memory.decider)
        with row.timed("decide", self.clock):
            entry = memory.recall(key)
            decision = entry.decision_for(state) if entry is not None else None
        if entry is not None and key in self.seen_keys:  # back on a screen it led away from
            memory.invalidate(key, "it led the run back to this screen")
            why = "it led the run back to this screen"
            row.memory = MemoryNote(entry=key, outcome="invalidated", source=entry.source, why=why)
            return None
        self.seen_keys.add(key)
        if entry is None or decision is None or self.repeats.refusal(decision, snap):
            row.memory = MemoryNote(entry=key, outcome="miss")  # a repeat: the decider decides
            return None
        arrival = self._arrival(snap, state)
        if decision.done and (refused := self.judge.done_refused(snap, state, arrival=arrival)):
            why = f"its done is not corroborated: {refused}"
            memory.invalidate(key, why)
            row.memory = MemoryNote(entry=key, outcome="invalidated", source=entry.source, why=why)
            return None
        row.memory = MemoryNote(entry=key, outcome="hit", source=entry.source)
        row.seen, row.decision = state, decision
        counters = (self.unproductive, self.stale)
        move = chosen(decision)
        if move is not None:
            stepped = self._move(row, snap, move)
        else:
            verdict = self.judge.verdict(decision, snap, state, arrival=arrival)  # every guard
            if verdict is not None:
                return verdict(row)
            target = snap.candidate(decision.target)
            if target is None:  # decision_for maps to a ref of this screen
                raise AssertionError("remembered decision has no target")
            self.device.expect_known_screen()  # this action led on from this screen before
            stepped = self._act(row, snap, decision, target)
        if stepped[0].outcome is Outcome.ACTED or stepped[0].outcome is Outcome.ERRORED:
            return stepped
        unproductive = stepped[0].outcome is Outcome.UNPRODUCTIVE
        why = "its action changed nothing" if unproductive else "its ref was stale"
        memory.invalidate(key, why)
        self.unproductive, self.stale = counters  # memory's miss does not count against the run
        row.memory = MemoryNote(entry=key, outcome="invalidated", source=entry.source, why=why)
        row.decision = row.action = row.result = None
        return None

    def _learn(self, state: DecideState, decision: Decision, row: Row) -> None:
        if self.memory is None or decision.decided_by == "memory":
            return
        # who answered: the chain's last attempt (the one acted on), else the one decider
        origin = row.attempts[-1].decider if row.attempts else self.tiers[0].name
        entry = remembered_from(
            state,
            decision,
            memory_key(state, self.memory.decider),
            source=_SOURCES.get(decision.decided_by, "model"),
            origin=origin,
        )
        if entry is not None:
            self.learned[entry.key] = entry

    def _state(self, snap: Snapshot, index: int) -> DecideState:
        """What the decider is asked: names and texts only, scrubbed of every input value."""
        return self.inputs.scrub_state(
            DecideState(
                goal=self.goal,
                step=index,
                candidates=(
                    *snap.candidates,
                    *(m for m in self.moves if (snap.fingerprint, m.ref) not in self.futile_moves),
                ),
                context=snap.context,
                input_names=self.inputs.names(),
                used_inputs=tuple(self.used_inputs),
                history=tuple(self.history[-HISTORY_LINES:]),
                futile=self.repeats.futile_refs(snap),
                done_when=self.params.done_when,
                screen=snap.screen,
            )
        )

    def _arrival(self, snap: Snapshot, state: DecideState) -> bool:
        """Whether `snap` is the screen the run started on (`workers.core.evidence`)."""
        return state.step == 1 or (bool(snap.fingerprint) and snap.fingerprint == self.arrival)

    def _act(self, row: Row, snap: Snapshot, d: Decision, target: Candidate) -> Step:
        value = self.inputs.get(d.input) if target.kind.fillable else None
        if value is not None and value.sensitive and self.shots is not None:
            self.shots.filled_secret(snap, target.ref)
        if value is not None and value.sensitive and self.video is not None:
            self.video.filling(snap, target.ref)
        row.action = action_on(snap, target, value)
        pinned = row.action.pinned
        try:
            with row.timed("action", self.clock):
                if value is not None:
                    row.result = result = self._retrying(lambda: self.device.fill(pinned, value))
                else:
                    row.result = result = self._retrying(lambda: self.device.press(pinned))
        except StaleRefError as exc:
            return self._stale(row, exc)
        except DeviceError as exc:
            return row.finish(Outcome.ERRORED, error=str(exc)), device_end(exc)
        self.stale = 0
        self.repeats.acted(snap, target.ref, value.name if value else None, changed=result.changed)
        verb = f"filled {value.name} into" if value is not None else "pressed"
        what = self.inputs.scrub(target.name) or target.ref  # the screen may show a typed value
        # a secure field shows nothing of what it holds (agent-device's settle diff on GTK says
        # "nothing changed" for a password that did arrive), and a field that already held the
        # value (an app kept from a run cut short) shows no change either: only a plain field
        # that showed something else is judged here
        if (
            value is not None
            and not result.changed
            and target.kind is not Kind.SECURE_TEXT_FIELD
            and target.value.strip() != value.value.get_secret_value().strip()
        ):
            why = (
                f"typing {value.name} into {what!r} changed nothing: the field did not take "
                "it, so nothing is submitted (the app's toolkit may report its controls where "
                "a click does not reach them; see docs/devices.md)"
            )
            return row.finish(Outcome.BLOCKED), End(RunStatus.BLOCKED, why)
        if value is not None and value.name not in self.used_inputs:
            self.used_inputs.append(value.name)
        self.last_act = f"step {row.index} ({verb} {what!r})"
        if result.changed:
            self.unproductive = 0
            self.history.append(f"{row.index}: {verb} {what}; screen changed")
            return row.finish(Outcome.ACTED), None
        return self._unproductive(row, f"{row.index}: {verb} {what}; nothing changed")

    def _move(self, row: Row, snap: Snapshot, move: Move) -> Step:
        """Make the device's `move` (the decider chose it among the screen's elements): one
        action, settled, judged by the settle diff as a press is."""
        direction = move.direction
        row.action = Action(kind=move.kind, ref="", pinned="", direction=direction)
        try:
            with row.timed("action", self.clock):
                row.result = result = self._retrying(
                    (lambda: self.device.scroll(direction)) if direction else self.device.back
                )
        except DeviceError as exc:
            return row.finish(Outcome.ERRORED, error=str(exc)), device_end(exc)
        self.stale = 0
        self.last_act = f"step {row.index} ({move.name})"
        if result.changed:
            self.unproductive = 0
            self.history.append(history_line(row.index, move, changed=True))
            return row.finish(Outcome.ACTED), None
        self.futile_moves.add((snap.fingerprint, move.ref))
        return self._unproductive(row, history_line(row.index, move, changed=False))

    def _unproductive(self, row: Row, line: str, refused: str | None = None) -> Step:
        """A step whose action changed nothing, or was `refused` as a repeat."""
        self.unproductive += 1
        self.history.append(line)
        stepped = row.finish(Outcome.UNPRODUCTIVE, error=refused)
        limit = self.params.max_unproductive
        if self.unproductive <= limit:
            return stepped, None
        why = f"{self.unproductive} steps in a row changed nothing (max_unproductive={limit})"
        return stepped, End(RunStatus.BLOCKED, f"{why}; the last was {refused}" if refused else why)

    def _stale(self, row: Row, exc: StaleRefError) -> Step:
        self.stale += 1
        ref = row.action.ref if row.action else "?"
        self.history.append(f"{row.index}: {ref} was stale; re-snapshot")
        stepped = row.finish(Outcome.STALE, error=f"stale ref: {exc.reason}")
        if self.stale < MAX_STALE_IN_A_ROW:
            return stepped, None
        return stepped, End(RunStatus.ERRORED, f"refs went stale {self.stale} times in a row", exc)

    # -- the run: the one place rows are recorded --------------------------------------------

    def run(self, on_step: StepHook | None) -> RunResult:
        started = self.clock()
        steps: list[StepRow] = []
        if self.video is not None:
            self.video.start()
        end = End(RunStatus.MAX_STEPS, f"max_steps={self.params.max_steps} reached")
        for index in range(1, self.params.max_steps + 1):
            if self.should_cancel is not None and self.should_cancel():
                end = End(RunStatus.CANCELLED, "cancelled by the caller")
                break
            row, ended = self.step(index)
            row = self.inputs.scrub_row(row)
            if self.shots is not None:  # after the scrub: an artifact id is not text
                row = self.shots.keep(row)
            steps.append(row)
            if on_step is not None:
                on_step(row)
            if ended is not None:
                end = ended
                break
        if end.status is RunStatus.BLOCKED and self.last_snap is not None:
            end = End(end.status, end.reason + no_controls(self.last_snap), end.error)
        writes = 0
        if end.status is RunStatus.DONE and self.memory is not None and self.learned:
            writes = self.memory.remember(self.learned.values())
        error = end.error
        duration_ms = (self.clock() - started) * 1000
        failure, video, video_note = self._evidence(steps, end)
        return RunResult(
            status=end.status,
            reason=self.inputs.scrub(end.reason),
            goal=self.goal,
            steps=tuple(steps),
            error=None
            if error is None
            else ErrorInfo(
                type=type(error).__name__,
                code=error.code,
                message=self.inputs.scrub(str(error)),
                device_fault=error.device_fault,
            ),
            totals=totals(steps),
            duration_ms=duration_ms,
            memory_writes=writes,
            failure=failure,
            video=video,
            video_note=video_note,
        )

    def _evidence(
        self, steps: list[StepRow], end: End
    ) -> tuple[FailureReport | None, str | None, str]:
        """A run that did not end `done`: its failure report (one more look at the screen
        it ended on); then its video, stopped after that look, as its artifact id or why none."""
        failure = None
        if end.status is not RunStatus.DONE:
            final = final_screen(
                self.device,
                self.inputs,
                self.goal,
                shots=self.shots,
                sleep=self.sleep,
                ended_by=end.error,
            )
            failure = failure_report(steps, final, self.tiers[0].name)
        if self.video is None:
            return failure, None, ""
        return (failure, *self.video.finish(end.status))


def no_controls(snap: Snapshot) -> str:
    """Why a screen offers nothing to act on, when it offers nothing ("" otherwise): the
    counts, and what the user can check."""
    if snap.candidates:
        return ""
    controls = [n for n in snap.nodes if kind_of(n).interactive]
    if not controls:
        return f"; the accessibility tree has {len(snap.nodes)} nodes and no control in it"
    return (
        f"; the accessibility tree has {len(snap.nodes)} nodes, {len(controls)} of them "
        "controls, none enabled and hittable: the app's toolkit may not report its controls' "
        "state to the accessibility bus (seen with GTK 4) — check the app answers a person's "
        "clicks, and that its toolkit's accessibility support is on"
    )


def run_goal(
    device: DevicePort,
    goal: str,
    *,
    decider: Decider,
    escalate_to: Sequence[Tier] = (),
    decider_name: str = "",
    inputs: Inputs | None = None,
    params: RunParams = DEFAULT_PARAMS,
    on_step: StepHook | None = None,
    should_cancel: CancelCheck | None = None,
    dangerous: tuple[str, ...] = DEFAULT_DANGEROUS,
    memory: DecisionMemory | None = None,
    camera: Camera | None = None,
    video: Videographer | None = None,
    prices: PriceTable | None = None,
    suite_budget: Budget | None = None,
    ledger: Ledger | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Run `goal` on `device` until it is done, blocked, escalated, errored, cancelled or out of
    steps. Never acts on a ref that is not in the current snapshot, never types text that was
    not supplied in `inputs`, and always ends within `params.max_steps` steps, one row each.
    On an escalation cause (low confidence, no valid answer, a guard) the same step asks the
    next decider of `escalate_to`; only after the last one does the run end `escalated`.
    With `memory`, a screen decided before in a `done` run is decided from it (verified by
    the settle diff), and this run's decisions are remembered if it ends `done`.
    With `camera`, each step keeps a picture of the screen the decider saw, secrets masked,
    the acted element marked (`workers.core.shots`); its artifact id is in the row.
    With `video`, the run is recorded where the device can, secrets painted over
    (`workers.core.video`); its artifact id is the result's `video`.
    With `prices` (the operator's table), each decision's `usage.cost` is priced; with
    `params.budget_tokens` / `budget_cost`, the call that would cross the budget is not made
    and the run ends `over-budget` (`workers.core.cost`); so with `suite_budget`, what every
    run of its suite spent together, kept in `ledger`."""
    given = inputs or Inputs()
    repeats = Repeats(given)
    tiers = (Tier(decider_name or (memory.decider if memory else "decider"), decider), *escalate_to)
    tiers = metered(tiers, params, prices, suite_budget, ledger)
    run = _Run(
        device=device,
        goal=goal,
        tiers=tiers,
        inputs=given,
        params=params,
        should_cancel=should_cancel,
        judge=Judge(params, Guards(given, word_pattern(dangerous)), given, repeats.typed),
        repeats=repeats,
        sleep=sleep,
        clock=clock,
        memory=memory,
        shots=None if camera is None else camera.session(device, inputs or Inputs(), clock),
        video=None if video is None else video.session(device, given, clock),
        moves=offered(device.actions()) if params.moves else (),
    )
    try:
        return run.run(on_step)
    finally:
        if run.video is not None:  # a run that raised leaves no recorder running
            run.video.abort()
