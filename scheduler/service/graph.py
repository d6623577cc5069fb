"""The scheduler side's object graph, built once from `Settings`: what the API
(`scheduler.api.app.create_app`) and the scheduler loop (`goalfleet scheduler`, and the local
fleet's thread) share: the store, the dispatcher, the fleet service, schedules and questions.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from dataclasses import dataclass
from typing import Any

import redis

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.dispatch.shares import Shares
from scheduler.service.fleet import Fleet
from scheduler.service.schedules import Schedules
from scheduler.service.webhooks import Webhooks
from scheduler.store.enqueue import CeleryEnqueuer, Enqueuer
from scheduler.store.runs import FleetStore
from workers.fleet.artifacts import Retention, artifacts
from workers.fleet.connections import store_client
from workers.fleet.keys import Keys
from workers.fleet.state.questions import QuestionStore
from workers.settings import Settings


def overdue_after_s(settings: Settings) -> float:
    """How long a run may stay `running` before the sweep ends it `errored`.

    Past the hard time limit (the pool child is killed and its worker sends the run again: the
    next delivery claims it with attempt + 1), plus two leases (a worker that dies instead
    loses its lease, and the lapsed sweep re-pends its run within one). Ending it any earlier
    would pre-empt that redelivery."""
    return settings.time_limit_s + 2 * settings.lease_s


@dataclass(frozen=True)
class Graph:
    client: redis.Redis
    keys: Keys
    store: FleetStore
    dispatcher: Dispatcher
    fleet: Fleet
    schedules: Schedules
    questions: QuestionStore
    celery: Any | None
    """The Celery app behind the enqueuer, when `build` made one (None: one was given)."""


def build(
    settings: Settings,
    *,
    client: redis.Redis | None = None,
    enqueuer: Enqueuer | None = None,
) -> Graph:
    """The graph over `client` (default: a new one on `settings.redis_url`) and `enqueuer`
    (default: Celery's, on the same Redis)."""
    client = client or store_client(settings, timeout_s=2.0)
    keys = Keys(settings.key_prefix)
    celery = None
    if enqueuer is None:
        from workers.fleet.celery_app import make_celery  # noqa: PLC0415 - only when not given

        celery = make_celery(settings)
        enqueuer = CeleryEnqueuer(celery)
    store = FleetStore(client, keys, retention_s=settings.retention_s)
    dispatcher = Dispatcher(
        store,
        enqueuer,
        overdue_after_s=overdue_after_s(settings),
        orphan_after_s=settings.orphan_after_s,
        lapsed_every_s=settings.lease_s / 4,
        unplaceable_after_s=settings.unplaceable_after_s,
        view_max_age_s=settings.device_view_max_age_s,
    )
    return Graph(
        client=client,
        keys=keys,
        store=store,
        dispatcher=dispatcher,
        fleet=Fleet(store, dispatcher, max_pending=settings.max_pending),
        schedules=Schedules(client, keys),
        questions=QuestionStore(
            client,
            keys,
            retention_s=settings.retention_s,
            memory_ttl_s=settings.memory_ttl_s,
            dangerous=tuple(settings.dangerous_controls),
        ),
        celery=celery,
    )


def run_scheduler(settings: Settings, stop: threading.Event) -> None:
    """Dispatch, fire schedules and expire questions until `stop` is set."""
    graph = build(settings, client=store_client(settings))
    shares = graph.dispatcher.shares = Shares(graph.client, graph.keys.schedulers)  # several split
    pictures = Retention(artifacts(settings), settings.retention_s)
    history = start_history(settings, graph.store, stop)

    def tick() -> None:
        graph.schedules.tick(graph.fleet)
        graph.questions.expire()  # unanswered past their deadline: escalated, as without a person
        pictures.tick()  # step pictures no kept run refers to any more

    hooks = webhooks(settings, graph)
    served = None
    if hooks is not None:  # on its own thread: a slow receiver never delays a dispatch
        served = threading.Thread(target=hooks.serve, args=(stop,), name="goalfleet-webhooks")
        served.daemon = True
        served.start()
    long_lived()
    try:
        graph.dispatcher.loop(stop, interval_s=settings.dispatch_interval_s, tick=tick)
    finally:
        if served is not None and hooks is not None:
            served.join(timeout=5)
            hooks.close()
        if history is not None:
            history.join(timeout=10)
        with contextlib.suppress(redis.RedisError):  # Redis down: the membership lapses anyway
            shares.leave()
        graph.client.close()


def long_lived() -> None:
    """What start-up made (the modules, Celery's app, the graph) lives as long as the process:
    collected once, then frozen out of the collector's sight (`gc.freeze`), so a full
    collection walks only what the loop makes. Unfrozen, one in about five 1,000-run passes
    paid a full walk of it: +20 % on that pass's CPU (docs/benchmarks.md §24)."""
    gc.collect()
    gc.freeze()


def webhooks(settings: Settings, graph: Graph) -> Webhooks | None:
    """The scheduler's webhook caller, or None when the fleet signs none (no secret)."""
    if settings.webhook_secret is None:
        return None
    return Webhooks(
        graph.client,
        graph.keys,
        graph.store,
        secret=settings.webhook_secret.get_secret_value(),
        fleet_url=settings.webhook_url,
        attempts=settings.webhook_attempts,
        timeout_s=settings.webhook_timeout_s,
        allow=tuple(settings.webhook_allow),
    )


def start_history(
    settings: Settings, store: FleetStore, stop: threading.Event
) -> threading.Thread | None:
    """With `database_url` set, a thread draining the history outbox into it until `stop`
    (an embedded SQLite database gets its tables here; a PostgreSQL one from `goalfleet db
    upgrade`, and the writer waits, holding every ended run, until it has them)."""
    if settings.database_url is None:
        return None
    from scheduler.store.history.outbox import HistoryWriter  # noqa: PLC0415 - psycopg: only on
    from scheduler.store.history.store import SqlHistory  # noqa: PLC0415

    url = settings.database_url.get_secret_value()
    history = SqlHistory.open(url, upgrade=url.startswith("sqlite"))
    writer = HistoryWriter(
        store,
        history,
        retention_s=settings.retention_s,
        history_retention_s=settings.history_retention_days * 86_400,
    )
    writer.turn_on()  # runs that end from here on are held for it, even before its first drain

    def drain() -> None:
        try:
            writer.loop(stop)
        finally:
            history.close()

    t = threading.Thread(target=drain, name="goalfleet-history", daemon=True)
    t.start()
    return t
