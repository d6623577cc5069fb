"""`goalfleet scheduler`: the dispatcher loop (pending runs → idle devices) and recurring
schedules. Run one or more per fleet; they coordinate through Redis."""

from __future__ import annotations

import argparse
import signal
import socket
import threading
from typing import Any

from scheduler.cli._common import (
    EXIT_OK,
    add_log_args,
    check_redis,
    shown_url,
    start_line,
    with_settings,
)
from workers.settings import Settings
from workers.telemetry.logs import configure_logging


def register(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers type is private
    p = sub.add_parser("scheduler", help="run the dispatcher and recurring schedules")
    add_log_args(p)
    p.set_defaults(func=main)


def overdue_after_s(settings: Settings) -> float:
    """How long a run may stay `running` before the sweep ends it `errored`.

    Past the hard time limit (the pool child is killed and its message requeued: the next
    delivery claims the run with attempt + 1) and past the visibility timeout plus one restore
    sweep (the whole worker died: its unacked message comes back and a restarted worker claims
    it with attempt + 1), plus two leases for that restart. Ending it any earlier would pre-empt
    that redelivery."""
    from workers.fleet.celery_app import restore_interval_s  # noqa: PLC0415 - Celery loads lazily

    vt = settings.visibility_timeout_s
    return max(settings.time_limit_s, vt + restore_interval_s(vt)) + 2 * settings.lease_s


def run_scheduler(settings: Settings, stop: threading.Event) -> None:
    """Dispatch and fire schedules until `stop` is set (the demo runs this in a thread)."""
    from scheduler.dispatch.dispatcher import Dispatcher  # noqa: PLC0415 - heavy imports kept lazy
    from scheduler.service.fleet import Fleet  # noqa: PLC0415
    from scheduler.service.schedules import Schedules  # noqa: PLC0415
    from scheduler.store.enqueue import CeleryEnqueuer  # noqa: PLC0415
    from scheduler.store.runs import FleetStore  # noqa: PLC0415
    from workers.fleet.celery_app import make_celery  # noqa: PLC0415
    from workers.fleet.connections import redis_client  # noqa: PLC0415
    from workers.fleet.keys import Keys  # noqa: PLC0415
    from workers.fleet.state.questions import QuestionStore  # noqa: PLC0415
    from workers.fleet.timings import publish_at_start  # noqa: PLC0415

    publish_at_start(settings, role="scheduler", who=f"scheduler@{socket.gethostname()}")
    client = redis_client(settings.redis_url)
    keys = Keys(settings.key_prefix)
    store = FleetStore(client, keys, retention_s=settings.retention_s)
    dispatcher = Dispatcher(
        store,
        CeleryEnqueuer(make_celery(settings)),
        overdue_after_s=overdue_after_s(settings),
        orphan_after_s=settings.orphan_after_s,
        unplaceable_after_s=settings.unplaceable_after_s,
        view_max_age_s=settings.device_view_max_age_s,
    )
    fleet = Fleet(store, dispatcher, max_pending=settings.max_pending)
    schedules = Schedules(client, keys)
    questions = QuestionStore(
        client,
        keys,
        retention_s=settings.retention_s,
        memory_ttl_s=settings.memory_ttl_s,
        dangerous=tuple(settings.dangerous_controls),
    )

    def tick() -> None:
        schedules.tick(fleet)
        questions.expire()  # unanswered past their deadline: escalated, as without a person

    try:
        dispatcher.loop(stop, interval_s=settings.dispatch_interval_s, tick=tick)
    finally:
        client.close()


@with_settings("scheduler")
def main(settings: Settings, args: argparse.Namespace) -> int:
    configure_logging(level=args.loglevel, fmt=args.log_format or settings.log_format)
    check_redis(settings.redis_url)  # cannot connect at start: one line, exit 3
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    start_line(
        "scheduler",
        f"dispatching runs from Redis {shown_url(settings.redis_url)} "
        f"(key prefix {settings.key_prefix}) every {settings.dispatch_interval_s:g} s",
    )
    run_scheduler(settings, stop)
    return EXIT_OK
