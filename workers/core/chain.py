"""A chain of deciders: on an escalation cause (low confidence, no valid answer, a guard),
the same step asks the next one; only after the last does the step escalate (to a person,
where the fleet parks the run with its question)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workers.core.errors import (
    BudgetExceededError,
    DecideError,
    DecisionInvalidError,
)
from workers.core.model import Attempt, DecideState, Decision, Outcome, RunStatus, Snapshot
from workers.core.ports import Decider
from workers.core.rows import End, Row, Step


def decide_end(exc: DecideError) -> tuple[Outcome, End]:
    """How a decider's failure ends the run: `over-budget` for a call the budget refused
    (`workers.core.cost`: not made), else `errored` (the model's transport, infrastructure)."""
    if isinstance(exc, BudgetExceededError):
        return Outcome.BLOCKED, End(RunStatus.OVER_BUDGET, str(exc), exc)
    return Outcome.ERRORED, End(RunStatus.ERRORED, f"decider failed: {exc}", exc)


@dataclass(frozen=True)
class Tier:
    """One decider of a chain, with the name its attempts are recorded under."""

    name: str
    decider: Decider


def ask(
    tiers: tuple[Tier, ...],
    state: DecideState,
    snap: Snapshot,
    *,
    row: Row,
    clock: Callable[[], float],
    escalation: Callable[[Decision, Snapshot], tuple[str | None, str | None]],
) -> Decision | Step:
    """The first answer along the chain that needs no escalation (every guard applies to
    each); when the last one escalates too, the step's escalated end. Every attempt is on
    the row when the chain has more than one decider (a lone decider keeps none: the common
    case costs no attempt records)."""
    chain = len(tiers) > 1
    attempts: list[Attempt] = []
    escalated: Step | None = None
    for tier in tiers:
        timer = row.timed("decide", clock)
        try:
            with timer:
                decision = tier.decider.decide(state)
        except DecisionInvalidError as exc:
            ms = timer.ms
            invalid = f"no valid decision: {exc}"
            if chain:
                attempts.append(Attempt(decider=tier.name, ms=round(ms, 3), escalated=invalid))
            escalated = (
                row.finish(Outcome.ESCALATED, error=str(exc)),
                End(RunStatus.ESCALATED, invalid, exc),
            )
            continue
        except DecideError as exc:  # infrastructure, or a budget: no chain papers over it
            ms = timer.ms
            if chain:
                attempts.append(Attempt(decider=tier.name, ms=round(ms, 3), escalated=str(exc)))
                row.attempts = tuple(attempts)
            outcome, end = decide_end(exc)
            return row.finish(outcome, error=str(exc)), end
        ms = timer.ms
        row.decision = decision
        why, problem = escalation(decision, snap)
        if chain:
            attempts.append(
                Attempt(decider=tier.name, decision=decision, ms=round(ms, 3), escalated=why or "")
            )
            row.attempts = tuple(attempts)
        if why is None:
            return decision
        escalated = row.finish(Outcome.ESCALATED, error=problem), End(RunStatus.ESCALATED, why)
    if escalated is None:  # pragma: no cover - a chain has at least one decider
        raise AssertionError("empty decider chain")
    if not chain:
        return escalated
    row.attempts = tuple(attempts)
    return escalated[0].model_copy(update={"attempts": row.attempts}), escalated[1]
