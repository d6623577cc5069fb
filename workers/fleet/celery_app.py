"""The Celery app, made from `Settings` (no module-level app, no work at import time).

The settings that make a run survive a worker's death without running twice at once:

- prefork, concurrency 1, prefetch 1: one run at a time per device; solo/threads pools lose
  the time limits and terminate.
- `task_acks_late` + `task_reject_on_worker_lost`: a killed pool child puts the run back.
- `task_acks_on_timeout` off: a pool child killed at the hard time limit puts the run back too
  (attempt + 1, up to the attempt cap).
- `global_keyprefix` (`Keys.celery`): the queues, kombu's unacked hash and Celery's results
  carry the fleet's key prefix.
- soft < hard time limit < `visibility_timeout`, the latter set on the broker, the result
  backend and the app alike (a shorter value anywhere wins): otherwise a long run is
  redelivered while still running, forever.
- `worker_deduplicate_successful_tasks`: a redelivered message whose task already succeeded
  in this process is skipped; the run task stores no Celery result (`ignore_result`: the run
  record holds it), so across processes the claim's compare-and-set does it.
- no ETA/countdown tasks anywhere (they sit unacked in the worker, bypass prefetch and are
  redelivered after the visibility timeout): pending runs wait in our store instead.
- events on, for monitoring.
- a Redis outage (full, read-only, loading, gone) never ends a worker: the broker transport is
  `workers.fleet.transport` (kombu's, riding out outages), channel errors restart the consumer
  and reconnection is retried for ever.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from celery import Celery

from workers.fleet.connections import sentinel_options
from workers.fleet.keys import DEFAULT_QUEUE, Keys
from workers.settings import Settings


def restore_interval_s(visibility_timeout_s: int) -> int:
    """How often a worker looks for unacked messages older than the visibility timeout (a
    worker whose main process died) and puts them back: a tenth of the timeout, 1-10 s.

    kombu's own default is a scan every 10 s x a throttle of 10, so such a run came back up to
    ~100 s after the timeout, whatever the timeout."""
    return max(1, min(10, visibility_timeout_s // 10))


def broker(settings: Settings) -> tuple[str, str, dict[str, Any]]:
    """The broker URL, its transport and the transport options that name the fleet's Redis:
    `redis_url`, or (`redis_sentinels`) kombu's `sentinel://` list, each with `redis_url`'s
    password and DB number, and the master's name."""
    if not settings.redis_sentinels:
        return settings.redis_url, "workers.fleet.transport:Transport", {}
    url = urllib.parse.urlsplit(settings.redis_url)
    auth = url.netloc.rpartition("@")[0]
    db = url.path.strip("/") or "0"
    hosts = [f"sentinel://{auth + '@' if auth else ''}{a}/{db}" for a in settings.redis_sentinels]
    options = {
        "master_name": settings.redis_sentinel_master,
        "sentinel_kwargs": sentinel_options(settings),
    }
    return ";".join(hosts), "workers.fleet.transport:SentinelTransport", options


def celery_config(settings: Settings) -> dict[str, Any]:
    vt = settings.visibility_timeout_s
    # Every key kombu and Celery write (queues, unacked hash and index, bindings, results)
    # starts with the fleet's prefix, as the store's do: fleets share one Redis DB untouched.
    prefix = Keys(settings.key_prefix).celery
    url, transport, where = broker(settings)
    return {
        "broker_url": url,
        "result_backend": url,
        "broker_transport_options": {
            "visibility_timeout": vt,
            "unacked_restore_interval": restore_interval_s(vt),
            "unacked_restore_throttle": 1,
            "global_keyprefix": prefix,
            **where,
        },
        "result_backend_transport_options": {
            "visibility_timeout": vt,
            "global_keyprefix": prefix,
            **where,
        },
        "visibility_timeout": vt,
        "broker_connection_retry_on_startup": True,
        # A Redis outage is waited out, never a reason to exit (`workers.fleet.transport`):
        # kombu's ack emulation without the writes a full Redis refuses; the consumer restarts
        # on anything else Redis refuses (OOM, READONLY) and reconnects for as long as it takes.
        "broker_transport": transport,
        "broker_channel_error_retry": True,
        "broker_connection_max_retries": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # A pool child SIGKILLed mid-run is sometimes only noticed by billiard at the hard time
        # limit, as TimeLimitExceeded rather than WorkerLostError; acked, that run would never
        # be redelivered. A hard time limit therefore requeues the message (attempt + 1; the
        # claim ends the run `errored` at the attempt cap); any other failure is acked.
        "task_acks_on_timeout": False,
        "task_acks_on_failure": True,
        "task_soft_time_limit": settings.soft_time_limit_s,
        "task_time_limit": settings.time_limit_s,
        "worker_prefetch_multiplier": 1,
        "worker_concurrency": 1,
        "worker_pool": "prefork",
        "worker_deduplicate_successful_tasks": True,
        # Task events only for a monitor that asks (`Settings.task_events`); no `task-sent`
        # event in any case: one more Redis publish on every send (monitors see received,
        # started and succeeded from the worker), and a submit's fast path publishes none
        # either way: its script pushes the message (`scheduler.store.enqueue`).
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
