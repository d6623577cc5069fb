"""Celery's task events (task-received, -started, -succeeded: three Redis publishes a run, and
the worker's own work to send them) are off unless `GOALFLEET_TASK_EVENTS` asks for them (a
Flower or `celery events` monitor): nothing in goalfleet reads them; the fleet is watched
through its run records, logs and metrics."""

from __future__ import annotations

import time

import pytest
import redis
from conftest import SIGN_IN

from scheduler.client.api_client import FleetClient
from workers.core.model import RunStatus
from workers.fleet.celery_app import make_celery
from workers.fleet.worker import worker_argv
from workers.settings import Settings

pytestmark = pytest.mark.fleet


def test_a_run_publishes_no_task_event(api: FleetClient, db: redis.Redis) -> None:
    """A whole run on a real worker process: not one task event on Celery's event exchange
    (a worker's own online/heartbeat events, a few per minute, Celery sends regardless)."""
    pubsub = db.pubsub()
    pubsub.psubscribe("*celeryev*")
    pubsub.get_message(timeout=1)  # the subscription's confirmation
    run = api.submit_run({**SIGN_IN, "device": "ios-2"})
    assert api.wait(run.id, timeout_s=60).status is RunStatus.DONE
    db.publish("probe.celeryev/probe", "x")  # heard last: the subscription held throughout
    heard: list[str] = []
    deadline = time.monotonic() + 10
    while "probe.celeryev/probe" not in heard and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.2)
        if message is not None and message["type"] == "pmessage":
            heard.append(message["channel"])
    assert "probe.celeryev/probe" in heard
    assert [channel for channel in heard if ".celeryev/task." in channel] == []
    pubsub.close()


def test_task_events_are_sent_when_asked_for() -> None:
    """`task_events=True` (GOALFLEET_TASK_EVENTS) turns them on for the workers' Celery app;
    the worker's command line sets nothing of its own either way."""
    on = make_celery(Settings(redis_url="redis://127.0.0.1:9/0", task_events=True))
    off = make_celery(Settings(redis_url="redis://127.0.0.1:9/0"))
    assert (on.conf.worker_send_task_events, off.conf.worker_send_task_events) == (True, False)
    from workers.core.model import Platform  # noqa: PLC0415 - this test's
    from workers.core.records import DeviceInfo  # noqa: PLC0415
    from workers.fleet.runtime import WorkerSpec  # noqa: PLC0415

    spec = WorkerSpec(info=DeviceInfo(id="d1", platform=Platform.IOS), device_spec="sim:x")
    assert "--task-events" not in worker_argv(spec)
    assert "-E" not in worker_argv(spec)
