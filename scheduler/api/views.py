"""What a principal is shown of the fleet's records (`workers.core.access` decides; this module
applies it to the records the routes answer with).

- a run, batch or schedule the principal may not read is "not found", exactly as one that does
  not exist (a 404 says nothing of another's work); an action its roles never grant is a 403
  naming the roles that would (`need`);
- inputs (the plain values a run types, and where its steps show them typed) are shown only to
  the owner and to `admin`: others see each value as `HIDDEN`;
- a device's run id, only where that run may be read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from scheduler.errors import AuthError, ForbiddenError, NotFoundError
from scheduler.service.requests import SuiteSubmit
from scheduler.service.schedules import Schedule
from workers.core.access import Action, Principal, granting
from workers.core.model import RunResult, StepRow
from workers.core.records import BatchRecord, DeviceState, Question, RunRecord
from workers.core.request import GoalRunRequest

bearer = HTTPBearer(auto_error=False, description="one of GOALFLEET_API_TOKENS")


async def principal(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """Who the request comes from (every guarded route's dependency; the edge has already
    refused a request without a valid token). Async: a compare in memory, run on the event
    loop rather than a thread-pool hop per request."""
    given = f"Bearer {creds.credentials}" if creds is not None else None
    who = request.app.state.tokens.who(given)
    if who is None:
        raise AuthError("missing or wrong bearer token")
    return who  # type: ignore[no-any-return]


Who = Annotated[Principal, Depends(principal)]
"""A route's principal, as a parameter: `who: Who`."""

HIDDEN = "<hidden>"
"""What an input's value reads as to someone who may not see it."""

WHAT = {
    Action.SUBMIT: "submit runs, batches or schedules",
    Action.READ_OWN: "read runs",
    Action.READ_ANY: "read runs",
    Action.CANCEL_OWN: "cancel runs or delete schedules",
    Action.CANCEL_ANY: "cancel runs or delete schedules",
    Action.INPUTS_ANY: "see other tokens' inputs",
    Action.DEVICES: "list devices",
    Action.QUESTIONS_ANY: "list questions",
    Action.ANSWER: "answer questions (an answer teaches the whole fleet)",
    Action.MEMORY_READ: "read the decision memory",
    Action.MEMORY_FORGET: "forget decision-memory entries",
    Action.METRICS: "scrape metrics",
}


def need(who: Principal, *actions: Action) -> None:
    """Refuse (403) unless the roles grant one of `actions`."""
    if not any(who.may(a) for a in actions):
        raise ForbiddenError(who.describe(), WHAT[actions[0]], granting(*actions))


def no_run(run_id: str) -> NotFoundError:
    return NotFoundError(f"no run {run_id!r} (unknown, or past its retention)")


def readable_run(who: Principal, run: RunRecord) -> RunRecord:
    """`run` as `who` may see it; 404 when it may not see it at all."""
    need(who, Action.READ_OWN, Action.READ_ANY)
    if not who.may_read(run.owner):
        raise no_run(run.id)
    return run if who.may_see_inputs(run.owner) else _hidden_run(run)


def shown_run(who: Principal, run: RunRecord) -> RunRecord:
    """`run` with its inputs hidden unless `who` may see them (no read check: the answer to
    something `who` may do to the run, such as answering its question)."""
    return run if who.may_see_inputs(run.owner) else _hidden_run(run)


def shown_steps(who: Principal, run: RunRecord, rows: list[StepRow]) -> list[StepRow]:
    return rows if who.may_see_inputs(run.owner) else [hidden_step(r) for r in rows]


def readable_batch(who: Principal, batch: BatchRecord) -> BatchRecord:
    need(who, Action.READ_OWN, Action.READ_ANY)
    if not who.may_read(batch.owner):
        raise NotFoundError(f"no batch {batch.id!r} (unknown, or past its retention)")
    return batch


def shown_schedule(who: Principal, sched: Schedule) -> Schedule:
    if who.may_see_inputs(sched.owner):
        return sched
    batch = sched.batch
    if isinstance(batch, SuiteSubmit):  # each flow's inputs hidden
        flows = [f.model_copy(update=_hidden(f)) for f in batch.flows]
        return sched.model_copy(update={"batch": batch.model_copy(update={"flows": flows})})
    return sched.model_copy(update={"batch": batch.model_copy(update=_hidden(batch))})


def shown_devices(
    who: Principal,
    devices: list[DeviceState],
    owners: Callable[[list[str]], dict[str, str | None]],
) -> list[DeviceState]:
    """The devices, each busy one's run id blanked unless `who` may read that run (`owners`
    reads the runs' owners, only when some must be checked)."""
    if who.sees_all:
        return devices
    busy = [d.run for d in devices if d.run is not None]
    owner = owners(busy) if busy and who.may(Action.READ_OWN) else {}
    return [
        d if d.run is None or who.may_read(owner.get(d.run)) else d.model_copy(update={"run": None})
        for d in devices
    ]


def shown_questions(
    who: Principal,
    questions: list[Question],
    owners: Callable[[list[str]], dict[str, str | None]],
) -> list[Question]:
    """Every open question for `who` with `questions_any`; else those of the runs it may read."""
    if who.may(Action.QUESTIONS_ANY):
        return questions
    need(who, Action.READ_OWN)
    owner = owners([q.run_id for q in questions]) if questions else {}
    return [q for q in questions if who.may_read(owner.get(q.run_id))]


def hidden_step(row: StepRow) -> StepRow:
    action = row.action
    if action is None or action.shown_value is None:
        return row
    return row.model_copy(update={"action": action.model_copy(update={"shown_value": HIDDEN})})


def _hidden(request: GoalRunRequest) -> dict[str, object]:
    return {"inputs": dict.fromkeys(request.inputs, HIDDEN)}


def _hidden_run(run: RunRecord) -> RunRecord:
    update: dict[str, object] = {"request": run.request.model_copy(update=_hidden(run.request))}
    if run.result is not None:
        steps = tuple(hidden_step(r) for r in run.result.steps)
        update["result"] = _result(run.result, steps)
    return run.model_copy(update=update)


def _result(result: RunResult, steps: tuple[StepRow, ...]) -> RunResult:
    return result.model_copy(update={"steps": steps})
