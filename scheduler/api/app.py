"""The queue API (FastAPI): submit runs and batches, read runs and live steps, cancel, list
devices, schedules, health and metrics.

Bearer-token auth on everything but /health and the OpenAPI docs (tokens from settings,
constant-time compare), checked at the edge before a body is read (`scheduler.api.edge`), which
also caps the body's size. Every bad input is a 4xx naming the field and the fix, and nothing
is written for it (`scheduler.api.limits` bounds what one request may ask for); Redis down, full
or read-only is a 503 with a `Retry-After` (`scheduler.api.errors`). No redirects: a path
with a trailing slash is a 404, never a Location built from the request's Host.
"""

from __future__ import annotations

from typing import Annotated

import redis
import structlog
from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.datastructures import Headers

from scheduler.api import errors as api_errors
from scheduler.api.bodies import BoundedRoute
from scheduler.api.docs import add_offline_docs
from scheduler.api.edge import CONSOLE_PREFIX, Edge, Tokens, open_paths
from scheduler.api.health import Beats, CeleryBeats, Detail, Health, NoBeats, Up
from scheduler.api.history import add_history_routes
from scheduler.api.limits import Limits
from scheduler.api.listing import add_list_routes
from scheduler.api.memory import add_memory_routes
from scheduler.api.observability import instrument_api, new_registry
from scheduler.api.questions import add_question_routes
from scheduler.api.submits import GUARDED_IDEMPOTENT, Submit, Submits, submit_header
from scheduler.api.throttle import AuthFailures
from scheduler.api.throttle import Limits as AuthLimits
from scheduler.api.views import (
    Who,
    need,
    readable_batch,
    readable_run,
    shown_devices,
    shown_run,
    shown_schedule,
    shown_steps,
)
from scheduler.console.pages import ConsoleDeps, add_console_routes
from scheduler.console.session import Sessions
from scheduler.errors import AuthError, ForbiddenError, NotFoundError
from scheduler.service.fleet import CancelOutcome
from scheduler.service.graph import build
from scheduler.service.requests import (
    BatchBody,
    BatchSubmit,
    RunSubmit,
    ScheduleBody,
    SuiteScheduleSubmit,
    SuiteSubmit,
)
from scheduler.service.run_ids import RunIds, checked
from scheduler.service.schedules import Schedule
from scheduler.store.enqueue import Enqueuer
from scheduler.store.history.db import shown_database_url
from workers.core.access import Action, Principal
from workers.core.model import RunStatus, StepRow
from workers.core.records import BatchRecord, DeviceState, RunRecord
from workers.fleet.artifacts import artifacts
from workers.fleet.memory_store import RedisMemory
from workers.fleet.outages import is_outage
from workers.settings import Settings

log = structlog.stdlib.get_logger("goalfleet.api")


class CancelAnswer(RunRecord):
    """The run after a cancel, and whether the cancel took effect."""

    cancel_outcome: CancelOutcome
    """`cancelled`: the run was waiting (queued, or parked for a person) and is cancelled now.
    `requested`: it is running; its worker stops before its next step, so it may still end
    otherwise (a step already under way can finish it `done`)."""


def create_app(  # noqa: C901, PLR0915 - the factory is the list of routes
    settings: Settings | None = None,
    *,
    client: redis.Redis | None = None,
    enqueuer: Enqueuer | None = None,
    registry: CollectorRegistry | None = None,
    beats: Beats | None = None,
) -> FastAPI:
    """The API's composition root (`uvicorn --factory scheduler.api.app:create_app`)."""
    settings = settings or Settings()
    graph = build(settings, client=client, enqueuer=enqueuer)
    client, keys, store, fleet = graph.client, graph.keys, graph.store, graph.fleet
    schedules, questions = graph.schedules, graph.questions
    if graph.celery is not None:
        beats = beats or CeleryBeats(graph.celery)
    run_ids = RunIds(client, keys)
    batch_ids = RunIds(client, keys, kind="batch")
    pictures = artifacts(settings)
    """A run id in a path may be a unique prefix (6+ characters) of one."""
    tokens = Tokens(settings.principals())
    if len(settings.api_tokens) > 1 and not settings.api_roles:
        log.warning(
            "api_roles_unset",
            tokens=len(settings.api_tokens),
            hint="every token holds every role (admin); give each its own with "
            "GOALFLEET_API_ROLES=name:read|submit|answer|admin,... (docs/fleet.md)",
        )
    limits = Limits.of(settings)
    history_url = settings.database_url.get_secret_value() if settings.database_url else None
    health_check = Health(
        store, beats or NoBeats(), history=shown_database_url(history_url) if history_url else None
    )
    principals = settings.principals()
    sessions = Sessions(client, keys, ((who.name, token) for who, token in principals))
    failures = AuthFailures(client, keys, AuthLimits.of(settings), salt=sessions.salt)
    for start in (health_check.arm, sessions.bind):
        try:  # the start marker, the console's tokens: each done later if Redis is down now
            start()
        except redis.RedisError as exc:
            if not is_outage(exc):
                raise
    metrics_registry = registry or new_registry()

    app = FastAPI(
        title="goalfleet",
        version="0.1.0",
        description="Goal runs on a fleet of devices: submit, route, watch, cancel.",
        redirect_slashes=False,
        docs_url=None,  # served offline by `add_offline_docs`
    )
    app.router.route_class = BoundedRoute  # every route: a JSON body's depth bounded
    add_offline_docs(app)
    app.state.fleet = fleet
    app.state.tokens = tokens  # `scheduler.api.views.principal` reads it
    submits = Submits()
    app.router.on_shutdown.append(submits.close)
    app.add_middleware(
        Edge,
        tokens=tokens,
        max_body_bytes=settings.api_max_body_bytes,
        open_paths=open_paths(app),
        open_prefixes=CONSOLE_PREFIX,
        routes=app.router.routes,
        failures=failures,
    )
    app.state.metrics = instrument_api(app, metrics_registry, store)  # outermost: counts all
    api_errors.install(app)

    @app.get(
        "/health",
        response_model=Detail | Up,
        responses={503: {"model": Detail | Up, "description": "Redis is unreachable"}},
    )
    def health(request: Request) -> JSONResponse:
        """Up or down; with a token, the detail (`degraded` and why)."""
        authed = tokens.who(request.headers.get("authorization")) is not None
        answer = health_check.detail() if authed else health_check.up()
        return JSONResponse(
            answer.model_dump(), status_code=503 if answer.status == "unavailable" else 200
        )

    @app.get("/metrics", response_class=Response)
    def metrics(who: Who) -> Response:
        need(who, Action.METRICS)
        return Response(generate_latest(metrics_registry), media_type=CONTENT_TYPE_LATEST)

    def run_submitted(sub: RunSubmit, submit: Submit, who: Principal) -> Response:
        limits.check_run(sub)
        run, created = fleet.submit_run(sub, idempotency_key=submit.key, owner=who.name)
        return submit.answer(
            "run.submitted", run, created=created, run_id=run.id, device_id=run.device
        )

    def batch_submitted(sub: BatchSubmit | SuiteSubmit, submit: Submit, who: Principal) -> Response:
        if isinstance(sub, SuiteSubmit):  # a suite's flows over their device matrix
            limits.check_suite(sub, signed=settings.webhook_secret is not None)
            batch, created = fleet.submit_suite(sub, idempotency_key=submit.key, owner=who.name)
            return submit.answer(
                "batch.submitted", batch, created=created, batch_id=batch.id, runs=batch.total
            )
        limits.check_batch(sub)
        batch, created = fleet.submit_batch(sub, idempotency_key=submit.key, owner=who.name)
        return submit.answer(
            "batch.submitted", batch, created=created, batch_id=batch.id, runs=batch.total
        )

    @app.post(
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

    @app.post("/v1/batches", status_code=201, response_model=BatchRecord)
    async def submit_batch(
        sub: BatchBody, submit: Annotated[Submit, Depends(submit_header)], who: Who
    ) -> Response:
        """One goal over a selector (or `count` runs), or a suite (`suite`, `flows`): each
        flow over its device matrix, all in one batch."""
        need(who, Action.SUBMIT)
        return await submits.run(batch_submitted, sub, submit, who)  # Redis calls block

    def scope(who: Principal) -> str | None:
        """The owner a prefix is matched among (None: everyone's)."""
        return None if who.sees_all else who.name

    def own_run(who: Principal, run_id: str) -> RunRecord:
        """The run `run_id` names, as `who` may see it (404 when it may not)."""
        need(who, Action.READ_OWN, Action.READ_ANY)
        return readable_run(who, fleet.run(run_ids.resolve(run_id, owner=scope(who))))

    def own_batch(who: Principal, batch_id: str) -> BatchRecord:
        need(who, Action.READ_OWN, Action.READ_ANY)
        return readable_batch(who, fleet.batch(batch_ids.resolve(batch_id, owner=scope(who))))

    @app.get("/v1/runs/{run_id}", response_model=RunRecord)
    def get_run(run_id: str, who: Who) -> RunRecord:
        return own_run(who, run_id)

    @app.get("/v1/runs/{run_id}/steps", response_model=list[StepRow])
    def get_steps(
        run_id: str, who: Who, after: Annotated[int, Query(ge=0, le=10_000)] = 0
    ) -> list[StepRow]:
        run = own_run(who, run_id)
        return shown_steps(who, run, fleet.steps(run.id, after=after))

    def pictured_run(who: Principal, run_id: str) -> RunRecord:
        """The run `run_id` names, when `who` may see its step pictures (the screenshot route's
        question, and the console's): for the run's owner and `admin` (a picture shows the
        plain inputs the run typed), and, while the run waits for an answer, for whoever may
        answer it (`Principal.may_see_pictures`). 404 where `who` may not read the run (as
        an unknown one); 403 where it may, but not its pictures."""
        if who.may(Action.READ_OWN) or who.may(Action.READ_ANY):
            run = own_run(who, run_id)
        else:  # an answerer, who reads no runs: the run its question is about
            need(who, Action.ANSWER)
            run = fleet.run(run_ids.resolve(run_id))
        if not who.may_see_pictures(run.owner, waiting=run.status is RunStatus.AWAITING_ANSWER):
            raise ForbiddenError(
                who.describe(),
                "see another token's screenshots (they show its inputs), or those of a run "
                "that waits for no answer",
                "admin",
            )
        return run

    @app.get(
        "/v1/runs/{run_id}/steps/{index}/screenshot",
        response_class=Response,
        responses={200: {"content": {"image/png": {}}, "description": "the step's picture"}},
    )
    def get_screenshot(
        run_id: str, index: Annotated[int, Path(ge=1, le=10_000)], who: Who
    ) -> Response:
        """The picture of step `index`: the screen its decider saw, secrets masked, the acted
        element outlined (PNG). 404 with the row's note when the step has none. Whose they
        are to see: `pictured_run`."""
        run = pictured_run(who, run_id)
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
                f"the picture of step {index} is not in {settings.artifact_dir} "
                "(give the API the workers' GOALFLEET_ARTIFACT_DIR)"
            )
        return Response(data, media_type="image/png", headers={"Cache-Control": "private"})

    @app.get(
        "/v1/runs/{run_id}/video",
        response_class=Response,
        responses={200: {"content": {"video/webm": {}}, "description": "the run's video"}},
    )
    def get_video(run_id: str, who: Who) -> Response:
        """The run's video (WebM, secrets painted over), where its device records one. 404
        with the result's note when it has none. Whose they are to see: `pictured_run`."""
        run = pictured_run(who, run_id)
        result = run.result
        if result is None or result.video is None:
            why = result.video_note if result is not None else "the run has not ended"
            raise NotFoundError(f"run {run.id!r} has no video: {why or 'none was recorded'}")
        data = pictures.get(result.video, "webm")
        if data is None:
            raise NotFoundError(f"the video of run {run.id!r} is no longer kept")
        return Response(data, media_type="video/webm", headers={"Cache-Control": "private"})

    @app.get(
        "/v1/runs/{run_id}/final/screenshot",
        response_class=Response,
        responses={200: {"content": {"image/png": {}}, "description": "the final screen"}},
    )
    def get_final_screenshot(run_id: str, who: Who) -> Response:
        """The picture of the screen a run that did not end `done` ended on, taken after its
        end (its failure report's, secrets masked). Whose they are to see: `pictured_run`."""
        run = pictured_run(who, run_id)
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

    @app.post("/v1/runs/{run_id}/cancel", response_model=CancelAnswer)
    def cancel(run_id: str, who: Who) -> CancelAnswer:
        need(who, Action.CANCEL_OWN, Action.CANCEL_ANY)
        mine = None if who.sees_all or who.may(Action.CANCEL_ANY) else who.name
        found = fleet.run(run_ids.resolve(run_id, owner=mine))
        if not who.may_read(found.owner) and not who.may_cancel(found.owner):
            raise NotFoundError(f"no run {found.id!r} (unknown, or past its retention)")
        if not who.may_cancel(found.owner):
            raise ForbiddenError(who.describe(), "cancel another token's run", "admin")
        if questions.cancel(found.id):  # a run parked for a person
            run, outcome = fleet.run(found.id), "cancelled"
        else:
            run, outcome = fleet.cancel(found.id)
        return CancelAnswer(**dict(shown_run(who, run)), cancel_outcome=outcome)

    @app.get("/v1/batches/{batch_id}", response_model=BatchRecord)
    def get_batch(batch_id: str, who: Who) -> BatchRecord:
        return own_batch(who, batch_id)

    @app.get("/v1/batches/{batch_id}/runs", response_model=list[RunRecord])
    def get_batch_runs(batch_id: str, who: Who) -> list[RunRecord]:
        batch = own_batch(who, batch_id)
        return [shown_run(who, r) for r in store.load_many(list(batch.runs))]

    @app.get("/v1/devices", response_model=list[DeviceState])
    def devices(who: Who) -> list[DeviceState]:
        need(who, Action.DEVICES)
        return shown_devices(who, fleet.devices(), store.owners)

    @app.post("/v1/schedules", status_code=201, response_model=Schedule)
    def add_schedule(sub: ScheduleBody, who: Who) -> Schedule:
        need(who, Action.SUBMIT)
        if isinstance(sub, SuiteScheduleSubmit):
            limits.check_suite(sub, signed=settings.webhook_secret is not None)
        else:
            limits.check_batch(sub)
        return schedules.add(sub, owner=who.name)

    @app.get("/v1/schedules", response_model=list[Schedule])
    def list_schedules(who: Who) -> list[Schedule]:
        need(who, Action.READ_OWN, Action.READ_ANY)
        return [shown_schedule(who, s) for s in schedules.list() if who.may_read(s.owner)]

    @app.delete("/v1/schedules/{schedule_id}", status_code=204)
    def remove_schedule(schedule_id: str, who: Who) -> Response:
        need(who, Action.CANCEL_OWN, Action.CANCEL_ANY)
        found = schedules.get(checked(schedule_id, "schedule"))
        if found is None or not (who.may_read(found.owner) or who.may_cancel(found.owner)):
            raise NotFoundError(f"no schedule {schedule_id!r}")
        if not who.may_cancel(found.owner):
            raise ForbiddenError(who.describe(), "delete another token's schedule", "admin")
        schedules.remove(schedule_id)
        return Response(status_code=204)

    add_list_routes(app, fleet, batch_ids)
    add_memory_routes(app, client, keys, ttl_s=settings.memory_ttl_s)
    add_history_routes(app, history_url)
    answer = add_question_routes(
        app, questions, fleet, registry=metrics_registry, resolve=run_ids.resolve
    )
    add_console_routes(
        app,
        ConsoleDeps(
            fleet=fleet,
            questions=questions,
            memory=RedisMemory(client, keys, decider="", ttl_s=settings.memory_ttl_s),
            pictures=pictures,
            client=client,
            keys=keys,
            lease_s=settings.lease_s,
            sessions=sessions,
            failures=failures,
            cookie_secure=settings.console_cookie_secure,
            who=lambda token: tokens.who(f"Bearer {token}"),
            principals={who.name: who for who, _ in principals},
            resolve=run_ids.resolve,
            run=own_run,
            pictured=pictured_run,
            answer=answer,
        ),
    )
    return app
