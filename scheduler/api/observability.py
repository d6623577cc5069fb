"""The API's metrics and logs: request metrics, the fleet's state as gauges, request context.

- `ApiMetrics` + `ObservabilityMiddleware` (pure ASGI): requests by method, route template and
  status code, and their latency. The route is the template (`/v1/runs/{run_id}`), never the
  raw path, so run ids do not become label values. Each request gets a `request_id` (the
  caller's `X-Request-ID` if it sent a sane one, else a new one), bound to the log context for
  the request and echoed back; Celery carries it on to the task (`workers.telemetry.logs`).
- `FleetCollector`: device up / busy / quarantined, queue depth per device, pending runs and
  the history outbox's backlog (runs, and the age of the oldest), read from Redis at scrape
  time. The fleet's state lives in Redis, not in any one process, so the API (one target per
  fleet) reports it; with several API replicas take `max by (device)`.
- `api_registry(...)`: a registry per app holding the above plus the process collectors.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, cast

import redis
import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler.store.history.outbox import backlog
from scheduler.store.runs import FleetStore
from workers.telemetry.metrics import NAMESPACE, Spec, make_metrics

log = structlog.stdlib.get_logger("goalfleet.api")

API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
KOMBU_PRIORITY_SEP = "\x06\x16"
"""kombu's Redis transport keeps priority levels 3, 6, 9 in lists named `queue` + SEP + n."""
PRIORITY_STEPS = ("3", "6", "9")

Scope = dict[str, Any]
Message = dict[str, Any]


@dataclass(frozen=True)
class ApiMetrics:
    """The API's request metrics, named `goalfleet_api_<field>`."""

    requests: Annotated[
        Counter,
        Spec(
            "HTTP requests to the queue API, by method, route template and status code.",
            ("method", "route", "code"),
        ),
    ]
    request_duration_seconds: Annotated[
        Histogram,
        Spec(
            "Latency of HTTP requests to the queue API.", ("method", "route"), buckets=API_BUCKETS
        ),
    ]

    @classmethod
    def create(cls, registry: CollectorRegistry) -> ApiMetrics:
        return make_metrics(cls, registry, prefix="api_")


def _route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "<unmatched>"


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = bytes(value).decode("latin-1")
            if _REQUEST_ID.fullmatch(text):
                return text
    return uuid.uuid4().hex


class ObservabilityMiddleware:
    """Times and counts every HTTP request; binds `request_id` to the log context."""

    def __init__(self, app: Any, metrics: ApiMetrics) -> None:  # noqa: ANN401 - any ASGI app
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:  # noqa: ANN401 - ASGI callables
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        status = 500
        t0 = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - t0
            method = str(scope.get("method", "GET"))
            route = _route_of(scope)
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.request_duration_seconds.labels(method, route).observe(elapsed)
            log.debug(
                "api.request",
                method=method,
                route=route,
                status=status,
                ms=round(elapsed * 1000, 1),
            )
            structlog.contextvars.clear_contextvars()


class FleetCollector(Collector):
    """The fleet's state from Redis, computed at each scrape (nothing cached, nothing stale)."""

    def __init__(self, store: FleetStore) -> None:
        self.store = store

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # computed per scrape; nothing to pre-register

    def collect(self) -> Iterator[GaugeMetricFamily]:
        reachable = GaugeMetricFamily(
            f"{NAMESPACE}_store_up",
            "1 when the API could read the fleet's state from Redis at this scrape.",
        )
        try:
            devices = self.store.registry.devices()
            depths = self._queue_depths([d.info.id for d in devices])
            pending_count = self.store.pending_count()
            held = backlog(self.store.r, self.store.k.history_outbox)
        except (redis.ConnectionError, redis.TimeoutError):
            reachable.add_metric([], 0)
            yield reachable
            return
        reachable.add_metric([], 1)
        yield reachable
        labels = ["device", "platform"]
        up = GaugeMetricFamily(
            f"{NAMESPACE}_device_up",
            "1 while the device's worker holds its heartbeat lease; 0 when registered but gone.",
            labels=labels,
        )
        busy = GaugeMetricFamily(
            f"{NAMESPACE}_device_busy",
            "1 while a run is reserved for or running on the device.",
            labels=labels,
        )
        quarantined = GaugeMetricFamily(
            f"{NAMESPACE}_device_quarantined",
            "1 while the device is quarantined after consecutive infrastructure failures.",
            labels=labels,
        )
        depth = GaugeMetricFamily(
            f"{NAMESPACE}_device_queue_depth",
            "Run messages waiting in the device's Celery queue (not yet taken by its worker).",
            labels=labels,
        )
        for d in devices:
            values = [d.info.id, d.info.platform.value]
            up.add_metric(values, 1 if d.alive else 0)
            busy.add_metric(values, 1 if d.busy else 0)
            quarantined.add_metric(values, 1 if d.quarantined else 0)
            depth.add_metric(values, depths.get(d.info.id, 0))
        pending = GaugeMetricFamily(
            f"{NAMESPACE}_runs_pending",
            "Runs accepted but not yet given to a device (waiting for an idle match).",
        )
        pending.add_metric([], pending_count)
        outbox = GaugeMetricFamily(
            f"{NAMESPACE}_history_backlog_runs",
            "Ended runs held in the history outbox, not yet in the history database.",
        )
        outbox.add_metric([], held.runs)
        age = GaugeMetricFamily(
            f"{NAMESPACE}_history_backlog_age_seconds",
            "How long ago the oldest run held in the history outbox ended (0: none held).",
        )
        age.add_metric([], held.age_s(time.time()))
        yield from (up, busy, quarantined, depth, pending, outbox, age)

    def _queue_depths(self, device_ids: list[str]) -> dict[str, int]:
        with self.store.r.pipeline(transaction=False) as p:
            for did in device_ids:
                q = self.store.k.queue(did)
                p.llen(q)
                for step in PRIORITY_STEPS:
                    p.llen(f"{q}{KOMBU_PRIORITY_SEP}{step}")
            out = cast("list[int]", p.execute())
        per = 1 + len(PRIORITY_STEPS)
        return {did: sum(out[i * per : (i + 1) * per]) for i, did in enumerate(device_ids)}


def new_registry() -> CollectorRegistry:
    """A fresh registry for one API app, with the process and platform collectors.

    One per app (not the global `REGISTRY`), so several apps in one process (tests, the demo)
    never collide on metric names."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def instrument_api(
    app: Any,  # noqa: ANN401 - a FastAPI app
    registry: CollectorRegistry,
    store: FleetStore | None,
) -> ApiMetrics:
    """Register the request metrics (and the fleet collector) in `registry` and add the
    middleware to `app`, before it starts serving."""
    metrics = ApiMetrics.create(registry)
    if store is not None:
        registry.register(FleetCollector(store))
    app.add_middleware(ObservabilityMiddleware, metrics=metrics)
    return metrics
