"""What `/health` says.

Without a token: up or down (`{"status": "ok"}`, or 503 `unavailable`), nothing else.
With one, the detail: Redis, pending runs, registered devices, and `degraded` with its reasons
when

- Redis lost its data since this API started: the API writes a start marker (`{p}:epoch`,
  SET NX) and remembers it; gone or replaced means a restart without persistence, a FLUSHDB
  or a failover to an empty replica. It stays degraded (the runs accepted before are gone)
  until the API restarts;
- a worker that beats is missing from the registry: a device whose worker answers a ping is
  not registered (`Beats`, a Celery control ping in the fleet, a fixed set in tests);
- Redis is full (maxmemory under `noeviction`) or a read-only replica (submits get 503).

Nothing here SCANs the keyspace: a GET (and a SET NX when the marker is gone), a ZCARD, an
SMEMBERS and two INFO sections.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal, Protocol, cast

import redis
import structlog
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel

from scheduler.api.bodies import BoundedRoute
from scheduler.api.edge import Tokens
from scheduler.api.views import Who, need
from scheduler.store.runs import FleetStore
from workers.core.access import Action
from workers.fleet.outages import is_outage

log = structlog.stdlib.get_logger("goalfleet.api")


class Beats(Protocol):
    def devices(self) -> set[str]:
        """The devices whose worker answers right now."""
        ...


class NoBeats:
    """No way to ask the workers (an API built without a Celery app): none are counted."""

    def devices(self) -> set[str]:
        return set()


class CeleryBeats:
    """Asks every worker with a Celery control ping (`w@<device>` answers for its device)."""

    def __init__(self, app: Any, *, timeout_s: float = 0.5) -> None:  # noqa: ANN401 - Celery ships no type hints
        self.app = app
        self.timeout_s = timeout_s

    def devices(self) -> set[str]:
        replies = cast("list[dict[str, Any]]", self.app.control.ping(timeout=self.timeout_s))
        return {name.partition("@")[2] for reply in replies for name in reply if "@" in name}


class Up(BaseModel):
    """The answer without a token."""

    status: Literal["ok", "unavailable"]


class Detail(BaseModel):
    """The answer with a token."""

    status: Literal["ok", "degraded", "unavailable"]
    redis: str
    """`ok`, `unreachable`, or what is wrong with it (full, read-only, ...)."""
    pending: int = 0
    devices: int = 0
    problems: list[str] = []
    history: str | None = None
    """Where the fleet records its run history (`GOALFLEET_DATABASE_URL`, its password
    hidden), or null: it keeps none (`goalfleet history` says so)."""


class Health:
    def __init__(self, store: FleetStore, beats: Beats, *, history: str | None = None) -> None:
        self.store = store
        self.beats = beats
        self.history = history
        self._marker: str | None = None
        self._lost_at: float | None = None

    def arm(self) -> None:
        """Write (or adopt) the start marker; at start, and again until it succeeds."""
        fresh = f"{uuid.uuid4().hex}:{time.time():.0f}"
        self.store.r.set(self.store.k.epoch, fresh, nx=True)
        self._marker = cast("str | None", self.store.r.get(self.store.k.epoch))

    def up(self) -> Up:
        try:
            self.store.ping()
        except redis.RedisError as exc:
            if is_outage(exc):
                return Up(status="unavailable")
            raise
        return Up(status="ok")

    def detail(self) -> Detail:
        try:
            self.store.ping()
            devices = set(self.store.registry.device_ids())
            pending = self.store.pending_count()
        except redis.RedisError as exc:
            if is_outage(exc):
                return Detail(status="unavailable", redis="unreachable", history=self.history)
            raise
        state = self._refusing_writes()
        problems = [] if state == "ok" else [f"Redis {state}: submits get 503 meanwhile"]
        try:
            problems += self._data_lost()
        except redis.RedisError as exc:  # full or read-only: the marker cannot be written
            if not is_outage(exc):
                raise
        problems += self._unregistered(devices)
        return Detail(
            status="degraded" if problems else "ok",
            redis=state,
            pending=pending,
            devices=len(devices),
            problems=problems,
            history=self.history,
        )

    def _refusing_writes(self) -> str:
        """`ok`, or why Redis refuses writes now: full under `noeviction`, or a replica."""
        memory = self.store.r.info("memory")
        limit = int(memory.get("maxmemory", 0) or 0)
        if (
            limit
            and int(memory.get("used_memory", 0)) >= limit
            and memory.get("maxmemory_policy") == "noeviction"
        ):
            return "is full (maxmemory reached under noeviction)"
        role = self.store.r.info("replication").get("role")
        return "is a read-only replica" if role == "slave" else "ok"

    def _data_lost(self) -> list[str]:
        if self._marker is None:
            self.arm()
        else:
            current = self.store.r.get(self.store.k.epoch)
            if current != self._marker:
                if self._lost_at is None:
                    self._lost_at = time.time()
                    log.warning("redis.data_lost", hint="runs accepted before may be unknown")
                self.arm()  # a new marker, so a second loss shows too
        if self._lost_at is None:
            return []
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._lost_at))
        return [
            (
                f"Redis lost its data since this API started (noticed {when}): runs accepted "
                "before may be unknown; check Redis persistence and failover, then restart "
                "the API"
            )
        ]

    def _unregistered(self, registered: set[str]) -> list[str]:
        try:
            beating = self.beats.devices()
        except Exception as exc:  # noqa: BLE001 - a ping that fails says nothing about health
            log.warning("health.ping_failed", error=type(exc).__name__)
            return []
        return [
            f"the worker of {device} beats but {device} is not registered: it re-registers "
            "at its next beat; if this stays, restart that worker"
            for device in sorted(beating - registered)
        ]


def health_router(check: Health, tokens: Tokens, registry: CollectorRegistry) -> APIRouter:
    """`/health` (open; the detail with a token) and `/metrics` (`metrics` role)."""
    router = APIRouter(route_class=BoundedRoute)

    @router.get(
        "/health",
        response_model=Detail | Up,
        responses={503: {"model": Detail | Up, "description": "Redis is unreachable"}},
    )
    def health(request: Request) -> JSONResponse:
        """Up or down; with a token, the detail (`degraded` and why)."""
        authed = tokens.who(request.headers.get("authorization")) is not None
        answer = check.detail() if authed else check.up()
        return JSONResponse(
            answer.model_dump(), status_code=503 if answer.status == "unavailable" else 200
        )

    @router.get("/metrics", response_class=Response)
    def metrics(who: Who) -> Response:
        need(who, Action.METRICS)
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
