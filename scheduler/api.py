"""The queue API (FastAPI): submit runs and batches, read runs and live steps, cancel, list
devices, schedules, health and metrics.

Bearer-token auth on everything but /health (tokens from settings, constant-time compare).
Every bad input is a 4xx naming the field and the fix, and nothing is written for it; Redis
down is a 503 saying so.
"""

from __future__ import annotations

import hmac
import re
from http import HTTPStatus
from typing import Annotated, Any

import redis
import structlog
from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from kombu.exceptions import OperationalError
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from scheduler.dispatcher import Dispatcher
from scheduler.enqueue import CeleryEnqueuer, Enqueuer
from scheduler.errors import AuthError, FleetError, InvalidRequestError, Problem
from scheduler.fleet import IDEMPOTENCY_KEY, Fleet
from scheduler.memory_api import add_memory_routes
from scheduler.observability import instrument_api, new_registry
from scheduler.questions_api import add_question_routes
from scheduler.requests import BatchSubmit, RunSubmit, ScheduleSubmit
from scheduler.run_ids import RunIds
from scheduler.schedules import Schedule, Schedules
from scheduler.store import FleetStore
from workers.core.model import StepRow
from workers.core.records import BatchRecord, DeviceState, RunRecord
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.questions import QuestionStore
from workers.settings import Settings

log = structlog.stdlib.get_logger("goalfleet.api")
_bearer = HTTPBearer(auto_error=False, description="one of GOALFLEET_API_TOKENS")
_IDEM = re.compile(IDEMPOTENCY_KEY)

_FIXES = {
    "missing": "add this field",
    "extra_forbidden": "remove this field; it is not part of the request",
    "string_too_long": "shorten it",
    "string_too_short": "give a non-empty value",
    "string_pattern_mismatch": "use the pattern shown",
    "int_parsing": "give a whole number",
    "int_type": "give a whole number",
    "float_parsing": "give a number",
    "greater_than_equal": "raise it to the minimum shown",
    "less_than_equal": "lower it to the maximum shown",
    "enum": "use one of the values shown",
    "dict_type": "give a JSON object",
    "model_type": "give a JSON object",
    "bool_parsing": "give true or false",
}


_HTTP_FIXES = {
    400: "send a UTF-8 JSON object with Content-Type: application/json",
    404: "see GET /openapi.json for the routes",
    405: "use one of the methods in the Allow header",
}


class Health(BaseModel):
    status: str
    redis: str
    pending: int = 0
    devices: int = 0


class ErrorBody(BaseModel):
    error: str
    message: str
    fix: str = ""
    problems: list[dict[str, str]] = []


def _problems_from(exc: RequestValidationError) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in {"body", "query", "path", "header"}]
        field = ".".join(loc) or "body"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        ctx = err.get("ctx") or {}
        fix = _FIXES.get(str(err.get("type")), "")
        if "max_length" in ctx:
            fix = f"shorten it to at most {ctx['max_length']} characters"
        elif "le" in ctx and "ge" not in ctx:
            fix = f"use a value of at most {ctx['le']}"
        elif "ge" in ctx:
            fix = f"use a value of at least {ctx['ge']}"
        elif "pattern" in ctx:
            fix = f"match the pattern {ctx['pattern']}"
        if field.startswith("secrets.") and field.endswith(".ref"):
            fix = "give a reference like env:NAME and set GOALFLEET_SECRET_NAME on the workers"
        if not fix and ";" in msg:  # our own validators say "<problem>; <fix>"
            fix = msg.split(";", 1)[1].strip()
        if not fix and ":" in msg:  # "<problem>: <how>"
            fix = msg.split(":", 1)[1].strip()
        out.append(Problem(field=field, problem=msg, fix=fix or "see the problem"))
    return out


def _error(status: int, code: str, message: str, fix: str = "", problems: Any = ()) -> JSONResponse:  # noqa: ANN401 - problem dicts
    body = ErrorBody(
        error=code,
        message=message,
        fix=fix,
        problems=[{"field": p.field, "problem": p.problem, "fix": p.fix} for p in problems],
    )
    return JSONResponse(status_code=status, content=body.model_dump())


class _Submit:
    """What the idempotent submits share: the `Idempotency-Key` header (checked when read, so
    a bad body is reported first), and the answer: 201 when this request created the record,
    200 when it replays an earlier one, with one log line either way."""

    def __init__(
        self, response: Response, idempotency_key: Annotated[str | None, Header()] = None
    ) -> None:
        self._response = response
        self._key = idempotency_key

    @property
    def key(self) -> str | None:
        if self._key is not None and not _IDEM.fullmatch(self._key):
            raise InvalidRequestError(
                "Idempotency-Key",
                "is not a valid key",
                "use 1-128 letters, digits or . _ : -",
            )
        return self._key

    def answer(self, event: str, *, created: bool, **fields: object) -> None:
        log.info(event, **fields, new=created)
        if not created:
            self._response.status_code = 200


def create_app(  # noqa: C901, PLR0915 - the factory is the list of routes
    settings: Settings | None = None,
    *,
    client: redis.Redis | None = None,
    enqueuer: Enqueuer | None = None,
    registry: CollectorRegistry | None = None,
) -> FastAPI:
    """The API's composition root (`uvicorn --factory scheduler.api:create_app`)."""
    settings = settings or Settings()
    client = client or redis_client(settings.redis_url, timeout_s=2.0)
    keys = Keys(settings.key_prefix)
    if enqueuer is None:
        from workers.fleet.celery_app import make_celery  # noqa: PLC0415 - only when not injected

        enqueuer = CeleryEnqueuer(make_celery(settings))
    store = FleetStore(client, keys, retention_s=settings.retention_s)
    dispatcher = Dispatcher(store, enqueuer, view_max_age_s=settings.device_view_max_age_s)
    fleet = Fleet(store, dispatcher, max_pending=settings.max_pending)
    schedules = Schedules(client, keys)
    questions = QuestionStore(
        client,
        keys,
        retention_s=settings.retention_s,
        memory_ttl_s=settings.memory_ttl_s,
        dangerous=tuple(settings.dangerous_controls),
    )
    run_ids = RunIds(client, keys)
    """A run id in a path may be a unique prefix (6+ characters) of one."""
    tokens = [(name, token.encode()) for name, token in settings.named_tokens()]
    metrics_registry = registry or new_registry()

    def auth(
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> str:
        """The name of the token the request carries (every route's guard)."""
        given = creds.credentials.encode() if creds is not None else b""
        who = ""
        for name, token in tokens:  # compare with every token, constant time each
            if hmac.compare_digest(given, token):
                who = name
        if not who:
            raise AuthError("missing or wrong bearer token")
        return who

    app = FastAPI(
        title="goalfleet",
        version="0.1.0",
        description="Goal runs on a fleet of devices: submit, route, watch, cancel.",
    )
    app.state.fleet = fleet
    app.state.metrics = instrument_api(app, metrics_registry, store)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = _problems_from(exc)
        if any(e.get("type") == "json_invalid" for e in exc.errors()):
            return _error(
                400,
                "MALFORMED_JSON",
                "the request body is not valid JSON",
                "send a JSON object with Content-Type: application/json",
                problems,
            )
        first = problems[0] if problems else Problem("body", "invalid")
        return _error(
            422, "INVALID_REQUEST", f"{first.field}: {first.problem}", first.fix, problems
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (unknown route, wrong method, a body it cannot decode) in
        # our error shape rather than FastAPI's bare {"detail": ...}.
        fix = _HTTP_FIXES.get(exc.status_code, "")
        code = HTTPStatus(exc.status_code).phrase.upper().replace(" ", "_")
        resp = _error(exc.status_code, code, str(exc.detail), fix)
        for name, value in (exc.headers or {}).items():
            resp.headers[name] = value
        return resp

    @app.exception_handler(FleetError)
    async def _fleet_error(_: Request, exc: FleetError) -> JSONResponse:
        problems = exc.problems if isinstance(exc, InvalidRequestError) else ()
        resp = _error(exc.status, exc.code, exc.message, exc.hint, problems)
        if isinstance(exc, AuthError):
            resp.headers["WWW-Authenticate"] = "Bearer"
        return resp

    async def _unavailable(_: Request, exc: Exception) -> JSONResponse:
        return _error(
            503,
            "REDIS_UNAVAILABLE",
            f"the fleet's Redis is not reachable ({type(exc).__name__}); nothing was written",
            "check that Redis is up at GOALFLEET_REDIS_URL, then retry",
        )

    for exc_type in (redis.ConnectionError, redis.TimeoutError, OperationalError):
        app.add_exception_handler(exc_type, _unavailable)

    guarded = [Depends(auth)]

    @app.get("/health", response_model=Health)
    def health(response: Response) -> Health:
        try:
            store.ping()
            return Health(
                status="ok",
                redis="ok",
                pending=store.pending_count(),
                devices=len(store.device_ids()),
            )
        except (redis.ConnectionError, redis.TimeoutError):
            response.status_code = 503
            return Health(status="unavailable", redis="unreachable")

    @app.get("/metrics", dependencies=guarded, response_class=Response)
    def metrics() -> Response:
        return Response(generate_latest(metrics_registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/runs", dependencies=guarded, status_code=201, response_model=RunRecord)
    def submit_run(sub: RunSubmit, submit: Annotated[_Submit, Depends()]) -> RunRecord:
        run, created = fleet.submit_run(sub, idempotency_key=submit.key)
        submit.answer("run.submitted", created=created, run_id=run.id, device_id=run.device)
        return run

    @app.post("/v1/batches", dependencies=guarded, status_code=201, response_model=BatchRecord)
    def submit_batch(sub: BatchSubmit, submit: Annotated[_Submit, Depends()]) -> BatchRecord:
        batch, created = fleet.submit_batch(sub, idempotency_key=submit.key)
        submit.answer("batch.submitted", created=created, batch_id=batch.id, runs=batch.total)
        return batch

    @app.get("/v1/runs/{run_id}", dependencies=guarded, response_model=RunRecord)
    def get_run(run_id: str) -> RunRecord:
        return fleet.run(run_ids.resolve(run_id))

    @app.get("/v1/runs/{run_id}/steps", dependencies=guarded, response_model=list[StepRow])
    def get_steps(run_id: str, after: Annotated[int, Query(ge=0, le=10_000)] = 0) -> list[StepRow]:
        return fleet.steps(run_ids.resolve(run_id), after=after)

    @app.post("/v1/runs/{run_id}/cancel", dependencies=guarded, response_model=RunRecord)
    def cancel(run_id: str) -> RunRecord:
        run_id = run_ids.resolve(run_id)
        if questions.cancel(run_id):  # a run parked for a person
            return fleet.run(run_id)
        return fleet.cancel(run_id)

    @app.get("/v1/batches/{batch_id}", dependencies=guarded, response_model=BatchRecord)
    def get_batch(batch_id: str) -> BatchRecord:
        return fleet.batch(batch_id)

    @app.get("/v1/batches/{batch_id}/runs", dependencies=guarded, response_model=list[RunRecord])
    def get_batch_runs(batch_id: str) -> list[RunRecord]:
        return store.load_many(list(fleet.batch(batch_id).runs))

    @app.get("/v1/devices", dependencies=guarded, response_model=list[DeviceState])
    def devices() -> list[DeviceState]:
        return fleet.devices()

    @app.post("/v1/schedules", dependencies=guarded, status_code=201, response_model=Schedule)
    def add_schedule(sub: ScheduleSubmit) -> Schedule:
        return schedules.add(sub)

    @app.get("/v1/schedules", dependencies=guarded, response_model=list[Schedule])
    def list_schedules() -> list[Schedule]:
        return schedules.list()

    @app.delete("/v1/schedules/{schedule_id}", dependencies=guarded, status_code=204)
    def remove_schedule(schedule_id: str) -> Response:
        schedules.remove(schedule_id)
        return Response(status_code=204)

    add_memory_routes(app, client, keys, ttl_s=settings.memory_ttl_s, guarded=guarded)
    add_question_routes(
        app, questions, fleet, auth=auth, registry=metrics_registry, resolve=run_ids.resolve
    )
    return app
