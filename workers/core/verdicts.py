"""What a decision comes to before anything is pressed: the step's end (done on evidence,
blocked, escalated) or nothing, meaning act on it. Every decision passes here, whoever made it:
a decider of the chain (`escalation`, the chain's escalation cause) or the decision memory
(`verdict`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workers.core import evidence
from workers.core.fields import Unready, unready
from workers.core.guards import Guards
from workers.core.model import DecideState, Decision, Inputs, Outcome, RunStatus, Snapshot
from workers.core.params import RunParams
from workers.core.rows import End, Row, Step


@dataclass(frozen=True)
class Judge:
    params: RunParams
    guards: Guards
    inputs: Inputs
    typed: Callable[[Snapshot], frozenset[str]]
    """Refs of the fields this run typed into that still hold it (`Repeats.typed`)."""

    def unready(self, d: Decision, snap: Snapshot, state: DecideState) -> Unready | None:
        """Why pressing `d.target` would submit the form too early (`workers.core.fields`),
        scrubbed of every input value (it quotes fields' names as the screen shows them)."""
        found = unready(d, snap, state, self.typed(snap))
        return None if found is None else Unready(self.inputs.scrub(found.why), found.blocked)

    def done_refused(self, snap: Snapshot, state: DecideState, *, arrival: bool) -> str | None:
        """Why a done claim on `snap` is not evidence (`workers.core.evidence`), scrubbed of
        every input value (it may quote a control's name as the screen shows it)."""
        refused = evidence.refusal(snap, state, arrival=arrival)
        return None if refused is None else self.inputs.scrub(refused)

    def escalation(
        self, d: Decision, snap: Snapshot, state: DecideState, *, arrival: bool
    ) -> tuple[str | None, str | None]:
        """Why this answer must go up the chain (and the guard's problem, for the row), or
        (None, None). Blocked is an answer; done is one only on evidence."""
        if d.done:
            refused = self.done_refused(snap, state, arrival=arrival)
            return (None, None) if refused is None else (f"done refused: {refused}", refused)
        if d.blocked:
            return None, None
        if d.confidence < self.params.min_confidence:
            low = (
                f"confidence {d.confidence:.2f} is below min_confidence "
                f"{self.params.min_confidence:.2f}"
            )
            return low, None
        problem = self.guards.unsafe(d, snap)
        if not problem:
            early = self.unready(d, snap, state)  # a blocked one is the verdict's, not a cause
            return (None, None) if early is None or early.blocked else (early.why, early.why)
        problem = self.inputs.scrub(problem)  # it quotes a control's name as the screen shows it
        return problem, problem

    def verdict(
        self,
        d: Decision,
        snap: Snapshot,
        state: DecideState,
        *,
        checked: bool = False,
        arrival: bool = False,
    ) -> Callable[[Row], Step] | None:
        """The step's end when the decision says so or cannot be acted on safely, else None.
        `checked`: the escalation causes (evidence, confidence, guards) were already checked."""
        if d.done:
            reason = d.reason or "the decider reports the goal reached"
            return lambda row: (row.finish(Outcome.DONE), End(RunStatus.DONE, reason))
        if d.blocked:
            reason = d.reason or "the decider reports it cannot progress"
            return lambda row: (row.finish(Outcome.BLOCKED), End(RunStatus.BLOCKED, reason))
        early = self.unready(d, snap, state)
        if early is not None and early.blocked:  # no decider can supply a missing input
            return lambda row: (
                row.finish(Outcome.BLOCKED, error=early.why),
                End(RunStatus.BLOCKED, early.why),
            )
        why, problem = (None, None) if checked else self.escalation(d, snap, state, arrival=arrival)
        if why is not None:
            return lambda row: (
                row.finish(Outcome.ESCALATED, error=problem),
                End(RunStatus.ESCALATED, why),
            )
        return None
