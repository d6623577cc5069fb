"""The failure report of a run that did not end `done` (`FailureReport`): the screen it ended on
(a fresh snapshot and picture taken after the end), the candidates as each decider of its last
decided step ranked them, every refusal of the run (the evidence check's, a guard's, a
confidence too low), and the path that step took up the chain of deciders.

Built from the run's rows and one more look at the device, after the last row is recorded: a
device that fails that look is a line in the report, never a change to how the run ended.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from workers.core.errors import DeviceError
from workers.core.model import (
    MAX_RANKED,
    Attempt,
    DecideState,
    Decision,
    FailureReport,
    FinalScreen,
    Inputs,
    Outcome,
    Ranking,
    Refusal,
    StepRow,
)
from workers.core.ports import DevicePort
from workers.core.rows import retry_transient
from workers.core.shots import ShotSession

MAX_FINAL_CANDIDATES = 30
"""The most candidates of the final screen a report lists (a long list is a page, not a cause)."""
MAX_REFUSALS = 40
"""The most refusals a report keeps, the last ones (100 steps x a chain of 5 would be 500)."""


def answer(d: Decision | None, names: dict[str, str]) -> str:
    """A decision as a person reads it: `e3 'Sign in'`, `done`, `blocked`, `no valid answer`."""
    if d is None:
        return "no valid answer"
    if d.done:
        return "done"
    if d.blocked:
        return "blocked"
    name = names.get(d.target, "")
    shown = f"{d.target} {name!r}" if name else d.target
    return f"{shown} ← {d.input}" if d.input != "none" else shown


def _ranking(step: StepRow, attempt: Attempt, names: dict[str, str]) -> Ranking:
    d = attempt.decision
    ranked: tuple[tuple[str, str, float], ...] = ()
    if d is not None and d.ranked:
        ranked = tuple((c.ref, names.get(c.ref, ""), c.confidence) for c in d.ranked)
    elif d is not None and not (d.done or d.blocked):
        ranked = ((d.target, names.get(d.target, ""), d.confidence),)
    return Ranking(
        step=step.index,
        decider=attempt.decider,
        answer=answer(d, names),
        candidates=ranked[:MAX_RANKED],
        escalated=attempt.escalated,
    )


def _attempts(step: StepRow, lone: str) -> tuple[Attempt, ...]:
    """The step's attempts along the chain; a lone decider's answer as its one attempt."""
    if step.attempts:
        return step.attempts
    escalated = ""
    if step.outcome is Outcome.ESCALATED:
        escalated = step.error or "escalated"
    return (Attempt(decider=lone, decision=step.decision, ms=step.decide_ms, escalated=escalated),)


def _names(step: StepRow) -> dict[str, str]:
    return {c.ref: c.name for c in step.seen.candidates} if step.seen is not None else {}


def refusals(steps: Sequence[StepRow], lone: str) -> tuple[Refusal, ...]:
    """Every answer the loop's checks refused, in step order: an attempt that went up the
    chain (a done claim the evidence check refused, a guard, a low confidence), and an answer
    the loop would not act on (a submit before a field is filled, a repeat)."""
    out: list[Refusal] = []
    for step in steps:
        if step.seen is None:
            continue
        names = _names(step)
        whys = set()
        for a in _attempts(step, lone):
            if a.escalated:
                whys.add(a.escalated)
                out.append(Refusal(step=step.index, decider=a.decider,
                                   claim=answer(a.decision, names), why=a.escalated))  # fmt: skip
        d = step.decision
        acted_on = d is not None and not (d.done or d.blocked) and step.action is None
        if acted_on and step.error and step.error not in whys:
            out.append(Refusal(step=step.index, decider=_who(step, lone),
                               claim=answer(d, names), why=step.error))  # fmt: skip
    return tuple(out[-MAX_REFUSALS:])


def _who(step: StepRow, lone: str) -> str:
    return step.attempts[-1].decider if step.attempts else lone


def final_screen(
    device: DevicePort,
    inputs: Inputs,
    goal: str,
    *,
    shots: ShotSession | None,
    sleep: Callable[[float], None],
    ended_by: BaseException | None = None,
) -> FinalScreen:
    """A fresh look at the device after the run's end, scrubbed as a decider's view is; none
    after a device failure (`ended_by`): a device that just failed or hung would only fail or
    hang again, and the run's time is better spent ending."""
    if isinstance(ended_by, DeviceError):
        return FinalScreen(
            error=f"no fresh look: the run ended on a device failure ({ended_by.code})"
        )
    try:
        snap = retry_transient(device.snapshot, sleep)
    except DeviceError as exc:
        return FinalScreen(error=inputs.scrub(str(exc)))
    seen = inputs.scrub_state(
        DecideState(
            goal=goal,
            step=0,
            candidates=snap.candidates[:MAX_FINAL_CANDIDATES],
            context=snap.context,
            input_names=inputs.names(),
        )
    )
    picture, note = (None, "the run takes no pictures") if shots is None else shots.final(snap)
    return FinalScreen(
        screen=inputs.scrub(snap.screen),
        fingerprint=snap.fingerprint,
        candidates=seen.candidates,
        context=seen.context,
        screenshot=picture,
        screenshot_note=note,
    )


def failure_report(steps: Sequence[StepRow], final: FinalScreen, lone: str) -> FailureReport:
    """The report of a run whose rows are `steps`, ended on `final`; `lone` names the decider
    of a run with no chain (its rows keep no attempts)."""
    asked = next((s for s in reversed(steps) if s.seen is not None), None)
    rankings: tuple[Ranking, ...] = ()
    path: tuple[str, ...] = ()
    if asked is not None:
        names = _names(asked)
        rankings = tuple(_ranking(asked, a, names) for a in _attempts(asked, lone))
        path = tuple(
            f"{r.decider}: {r.answer}" + (f" — went up: {r.escalated}" if r.escalated else "")
            for r in rankings
        )
    return FailureReport(
        final=final, rankings=rankings, refusals=refusals(steps, lone), escalation=path
    )
