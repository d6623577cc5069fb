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

import redis
import structlog
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from scheduler.api import errors as api_errors
from scheduler.api.batches import batches_router
from scheduler.api.devices import devices_router
from scheduler.api.docs import docs_router
from scheduler.api.edge import CONSOLE_PREFIX, Edge, Tokens, open_paths
from scheduler.api.health import Beats, CeleryBeats, Health, NoBeats, health_router
from scheduler.api.history import history_router
from scheduler.api.limits import Limits
from scheduler.api.memory import memory_router
from scheduler.api.observability import instrument_api, new_registry
from scheduler.api.questions import Answers, questions_router
from scheduler.api.reads import Reads
from scheduler.api.runs import runs_router
from scheduler.api.schedules import schedules_router
from scheduler.api.submits import Submits
from scheduler.api.throttle import AuthFailures
from scheduler.api.throttle import Limits as AuthLimits
from scheduler.console.pages import ConsoleDeps, SignIn, console_router, to_sign_in
from scheduler.console.session import Sessions
from scheduler.service.graph import build
from scheduler.service.run_ids import RunIds
from scheduler.store.enqueue import Enqueuer
from scheduler.store.history.db import shown_database_url
from workers.fleet.artifacts import artifacts
from workers.fleet.memory_store import RedisMemory
from workers.fleet.outages import is_outage
from workers.settings import Settings

log = structlog.stdlib.get_logger("goalfleet.api")
OPENAPI_URL = "/openapi.json"


def create_app(
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
    reads = Reads(fleet, RunIds(client, keys), RunIds(client, keys, kind="batch"))
    pictures = artifacts(settings)
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

    signed = settings.webhook_secret is not None  # a suite may name its own webhook
    submits = Submits()
    answers = Answers(questions, fleet, registry=metrics_registry, resolve=reads.run_ids.resolve)
    title = "goalfleet"
    routers = (  # one per resource; their routes are the app's, flat, in this order
        docs_router(title, OPENAPI_URL),
        health_router(health_check, tokens, metrics_registry),
        runs_router(
            reads,
            tokens=tokens,
            submits=submits,
            limits=limits,
            questions=questions,
            pictures=pictures,
            artifact_dir=settings.artifact_dir,
        ),
        batches_router(reads, store=store, submits=submits, limits=limits, signed=signed),
        devices_router(fleet),
        schedules_router(schedules, limits=limits, signed=signed),
        memory_router(client, keys, ttl_s=settings.memory_ttl_s),
        history_router(history_url),
        questions_router(answers),
        console_router(
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
                resolve=reads.run_ids.resolve,
                run=reads.run,
                pictured=reads.pictured,
                answer=answers.answer,
            )
        ),
    )
    app = FastAPI(
        title=title,
        version="0.1.0",
        description="Goal runs on a fleet of devices: submit, route, watch, cancel.",
        redirect_slashes=False,
        openapi_url=OPENAPI_URL,
        docs_url=None,  # served offline by `docs_router`
        # The routers' routes themselves (each a `BoundedRoute`: a JSON body's depth bounded),
        # not `include_router`'s lazily resolved branches: the edge matches a refused request
        # against these to label it, as the router would.
        routes=[route for router in routers for route in router.routes],
        exception_handlers={SignIn: to_sign_in},
    )
    app.state.fleet = fleet
    app.state.tokens = tokens  # `scheduler.api.views.principal` reads it
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
    return app
