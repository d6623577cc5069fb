"""The runs: submit one, list them, read one with its live steps and pictures, cancel one.

POST /v1/runs                                 one goal run (`Idempotency-Key` honoured)
GET  /v1/runs                                 newest first, filtered and paged
GET  /v1/runs/{run_id}                        the run (a unique prefix of 6+ will do)
GET  /v1/runs/{run_id}/steps?after=N          its step rows, as they are written
GET  /v1/runs/{run_id}/steps/{index}/screenshot   a step's picture (PNG)
GET  /v1/runs/{run_id}/final/screenshot       the screen a run not `done` ended on
POST /v1/runs/{run_id}/cancel                 cancel it, or ask its worker to stop
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel
from starlette.datastructures import Headers

from scheduler.api.bodies import BoundedRoute
from scheduler.api.edge import Tokens
from scheduler.api.limits import Limits
from scheduler.api.reads import Reads
from scheduler.api.submits import GUARDED_IDEMPOTENT, Submit, Submits
from scheduler.api.views import Who, need, shown_run, shown_steps
from scheduler.errors import AuthError, ForbiddenError, NotFoundError
from scheduler.service.fleet import CancelOutcome
from scheduler.service.requests import RunFilters, RunSubmit
from scheduler.store.listing import RunQuery
from workers.core.access import Action, Principal
from workers.core.model import StepRow
from workers.core.records import RunRecord
from workers.fleet.artifacts import FileArtifacts
from workers.fleet.state.questions import QuestionStore


class RunPageOut(BaseModel):
    runs: list[RunRecord]
    next: str | None
    """Pass it as `cursor` for the next page; null: this was the last one."""


class CancelAnswer(RunRecord):
    """The run after a cancel, and whether the cancel took effect."""

    cancel_outcome: CancelOutcome
    """`cancelled`: the run was waiting (queued, or parked for a person) and is cancelled now.
    `requested`: it is running; its worker stops before its next step, so it may still end
    otherwise (a step already under way can finish it `done`)."""


def runs_router(  # noqa: C901, PLR0915 - the resource's routes
    reads: Reads,
    *,
    tokens: Tokens,
    submits: Submits,
    limits: Limits,
    questions: QuestionStore,
    pictures: FileArtifacts,
    artifact_dir: object,
) -> APIRouter:
    fleet = reads.fleet
    router = APIRouter(route_class=BoundedRoute)

    def run_submitted(sub: RunSubmit, submit: Submit, who: Principal) -> Response:
        limits.check_run(sub)
        run, created = fleet.submit_run(sub, idempotency_key=submit.key, owner=who.name)
        return submit.answer(
            "run.submitted", run, created=created, run_id=run.id, device_id=run.device
        )

    @router.post(
        "/v1/runs", status_code=201, response_model=RunRecord, openapi_extra=GUARDED_IDEMPOTENT
    )
    async def submit_run(sub: RunSubmit, request: Request) -> Response:
        return await one_run(sub, request.headers)

    async def one_run(sub: RunSubmit, headers: Headers) -> Response:
        """The guard and the `Idempotency-Key` read from the headers, not through FastAPI's
        dependencies (solving `auth`, its bearer scheme and the header cost a third of the
        route's CPU a submit); `GUARDED_IDEMPOTENT` documents both as they would."""
        who = tokens.who(headers.get("authorization"))
        if who is None:  # the edge refused it too
            raise AuthError("missing or wrong bearer token")
        need(who, Action.SUBMIT)
        submit = Submit(headers.get("idempotency-key"))
        return await submits.run(run_submitted, sub, submit, who)  # Redis calls block

    @router.get("/v1/runs/{run_id}", response_model=RunRecord)
    def get_run(run_id: str, who: Who) -> RunRecord:
        return reads.run(who, run_id)

    @router.get("/v1/runs/{run_id}/steps", response_model=list[StepRow])
    def get_steps(
        run_id: str, who: Who, after: Annotated[int, Query(ge=0, le=10_000)] = 0
    ) -> list[StepRow]:
        run = reads.run(who, run_id)
        return shown_steps(who, run, fleet.steps(run.id, after=after))

    @router.get(
        "/v1/runs/{run_id}/steps/{index}/screenshot",
        response_class=Response,
        responses={200: {"content": {"image/png": {}}, "description": "the step's picture"}},
    )
    def get_screenshot(
        run_id: str, index: Annotated[int, Path(ge=1, le=10_000)], who: Who
    ) -> Response:
        """The picture of step `index`: the screen its decider saw, secrets masked, the acted
        element outlined (PNG). 404 with the row's note when the step has none. Whose they
        are to see: `Reads.pictured`."""
        run = reads.pictured(who, run_id)
        run_id = run.id
        row = next((r for r in fleet.steps(run_id, after=index - 1) if r.index == index), None)
        if row is None:
            raise NotFoundError(f"run {run_id!r} has no step {index} (yet)")
        if row.screenshot is None:
            why = row.screenshot_note or "the run took no screenshots"
            raise NotFoundError(f"step {index} of run {run_id!r} has no screenshot: {why}")
        data = pictures.get(row.screenshot)
        if data is None:
            raise NotFoundError(
                f"the picture of step {index} is not in {artifact_dir} "
                "(give the API the workers' GOALFLEET_ARTIFACT_DIR)"
            )
        return Response(data, media_type="image/png", headers={"Cache-Control": "private"})

    @router.get(
        "/v1/runs/{run_id}/video",
        response_class=Response,
        responses={200: {"content": {"video/webm": {}}, "description": "the run's video"}},
    )
    def get_video(run_id: str, who: Who) -> Response:
        """The run's video (WebM, secrets painted over), where its device records one. 404
        with the result's note when it has none. Whose they are to see: `Reads.pictured`."""
        run = reads.pictured(who, run_id)
        result = run.result
        if result is None or result.video is None:
            why = result.video_note if result is not None else "the run has not ended"
            raise NotFoundError(f"run {run.id!r} has no video: {why or 'none was recorded'}")
        data = pictures.get(result.video, "webm")
        if data is None:
            raise NotFoundError(f"the video of run {run.id!r} is no longer kept")
        return Response(data, media_type="video/webm", headers={"Cache-Control": "private"})

    @router.get(
        "/v1/runs/{run_id}/final/screenshot",
        response_class=Response,
        responses={200: {"content": {"image/png": {}}, "description": "the final screen"}},
    )
    def get_final_screenshot(run_id: str, who: Who) -> Response:
        """The picture of the screen a run that did not end `done` ended on, taken after its
        end (its failure report's, secrets masked). Whose they are to see: `Reads.pictured`."""
        run = reads.pictured(who, run_id)
        failure = run.result.failure if run.result is not None else None
        if failure is None or failure.final.screenshot is None:
            why = failure.final.screenshot_note or failure.final.error if failure else ""
            raise NotFoundError(
                f"run {run.id!r} has no final picture: {why or 'it has no failure report'}"
            )
        data = pictures.get(failure.final.screenshot)
        if data is None:
            raise NotFoundError(f"the final picture of run {run.id!r} is no longer kept")
        return Response(data, media_type="image/png", headers={"Cache-Control": "private"})

    @router.post("/v1/runs/{run_id}/cancel", response_model=CancelAnswer)
    def cancel(run_id: str, who: Who) -> CancelAnswer:
        need(who, Action.CANCEL_OWN, Action.CANCEL_ANY)
        mine = None if who.sees_all or who.may(Action.CANCEL_ANY) else who.name
        found = fleet.run(reads.run_ids.resolve(run_id, owner=mine))
        if not who.may_read(found.owner) and not who.may_cancel(found.owner):
            raise NotFoundError(f"no run {found.id!r} (unknown, or past its retention)")
        if not who.may_cancel(found.owner):
            raise ForbiddenError(who.describe(), "cancel another token's run", "admin")
        if questions.cancel(found.id):  # a run parked for a person
            run, outcome = fleet.run(found.id), "cancelled"
        else:
            run, outcome = fleet.cancel(found.id)
        return CancelAnswer(**dict(shown_run(who, run)), cancel_outcome=outcome)

    @router.get("/v1/runs", response_model=RunPageOut)
    def list_runs(filters: Annotated[RunFilters, Query()], who: Who) -> RunPageOut:
        """Runs newest first. A page may hold fewer than `limit` runs when a filter matches
        little (each page reads a bounded part of the list): go on while `next` is given.
        A token that may read only its own runs lists only those."""
        need(who, Action.READ_OWN, Action.READ_ANY)
        f = filters
        owner = reads.scope(who)
        query = RunQuery(
            status=f.status,
            device=f.device,
            batch=reads.batch_ids.resolve(f.batch, owner=owner) if f.batch else None,
            schedule=f.schedule,
            suite=f.suite,
            flow=f.flow,
            goal=f.goal,
            since=f.since,
            until=f.until,
            limit=f.limit,
            cursor=f.cursor,
            owner=owner,
        )
        page = fleet.runs(query)
        return RunPageOut(runs=[shown_run(who, r) for r in page.runs], next=page.next)

    return router
