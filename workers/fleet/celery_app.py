"""The Celery app, made from `Settings` (no module-level app, no work at import time).

Celery is the worker framework, used through its public API and settings only; delivery and
redelivery are the fleet's own (docs/design.md, "One delivery protocol"):

- the broker delivers at most once: kombu's Redis transport with `ack_emulation` off takes a
  message off its list on receipt (no unacked hash, no visibility timeout, no restore), and
  the run task acknowledges early (`task_acks_late` off). Every redelivery is the fleet's: the
  claim is a compare-and-set, a dead worker's run is re-pended by the lapsed sweep, a
  reservation never claimed is sent again by the orphan sweep, and a pool child killed (or
  hard time limit) is sent again by its own worker (`workers.fleet.worker`).
- prefork, concurrency 1, prefetch 1: one run at a time per device; solo/threads pools lose
  the time limits and terminate.
- `global_keyprefix` (`Keys.celery`): the queues and bindings carry the fleet's key prefix.
- no ETA/countdown tasks anywhere: pending runs wait in our store instead.
- task events for a monitor that asks.
- a Redis outage (full, read-only, loading, gone) never ends a worker: channel errors restart
  the consumer and reconnection is retried for ever; taking a message off its list is a pop,
  which a full Redis still accepts.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from celery import Celery

from workers.fleet.connections import sentinel_options
from workers.fleet.keys import DEFAULT_QUEUE, Keys
from workers.settings import Settings


def broker(settings: Settings) -> tuple[str, str, dict[str, Any]]:
    """The broker URL, its transport and the transport options that name the fleet's Redis:
    `redis_url`, or (`redis_sentinels`) kombu's `sentinel://` list, each with `redis_url`'s
    password and DB number, and the master's name."""
    if not settings.redis_sentinels:
        return settings.redis_url, "redis", {}
    url = urllib.parse.urlsplit(settings.redis_url)
    auth = url.netloc.rpartition("@")[0]
    db = url.path.strip("/") or "0"
    hosts = [f"sentinel://{auth + '@' if auth else ''}{a}/{db}" for a in settings.redis_sentinels]
    options = {
        "master_name": settings.redis_sentinel_master,
        "sentinel_kwargs": sentinel_options(settings),
    }
    return ";".join(hosts), "sentinel", options


def celery_config(settings: Settings) -> dict[str, Any]:
    # Every key kombu and Celery write (queues, bindings) starts with the fleet's prefix, as
    # the store's do: fleets share one Redis DB untouched.
    prefix = Keys(settings.key_prefix).celery
    url, transport, where = broker(settings)
    return {
        "broker_url": url,
        "result_backend": url,
        "broker_transport_options": {
            # at most once: popped on receipt, no unacked hash, no visibility timeout
            "ack_emulation": False,
            "global_keyprefix": prefix,
            **where,
        },
        "result_backend_transport_options": {"global_keyprefix": prefix, **where},
        "broker_connection_retry_on_startup": True,
        # A Redis outage is waited out, never a reason to exit: the consumer restarts on
        # anything Redis refuses (OOM, READONLY) and reconnects for as long as it takes.
        "broker_transport": transport,
        "broker_channel_error_retry": True,
        "broker_connection_max_retries": None,
        "task_acks_late": False,
        "task_soft_time_limit": settings.soft_time_limit_s,
        "task_time_limit": settings.time_limit_s,
        "worker_prefetch_multiplier": 1,
        "worker_concurrency": 1,
        "worker_pool": "prefork",
        # Task events only for a monitor that asks (`Settings.task_events`); no `task-sent`
        # event in any case: one more Redis publish on every send (monitors see received,
        # started and succeeded from the worker).
        "worker_send_task_events": settings.task_events,
        "task_send_sent_event": False,
        "worker_hijack_root_logger": False,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_expires": settings.result_ttl_s,
        "task_default_queue": DEFAULT_QUEUE,
        "task_create_missing_queues": True,
        "task_publish_retry_policy": {
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.5,
        },
        "broker_pool_limit": 10,
        "worker_max_tasks_per_child": 1000,
    }


def make_celery(settings: Settings) -> Celery:
    """The app as a sender uses it (API, scheduler): it names the task by `RUN_TASK` and
    never imports the worker's task code. The worker adds its tasks with `register_tasks`."""
    app = Celery("goalfleet", set_as_current=False)
    app.conf.update(celery_config(settings))
    return app
