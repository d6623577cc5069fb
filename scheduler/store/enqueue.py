"""The seam between the scheduler and the broker: the message that puts one run id on one
device's queue."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any, Protocol

import redis
from kombu.entity import DELIVERY_MODES

from workers.fleet.connections import store_client
from workers.fleet.keys import RUN_TASK, Keys, device_queue
from workers.fleet.state.queue import Message
from workers.settings import Settings
from workers.telemetry.logs import publish_headers


class Enqueuer(Protocol):
    """The one way a run reaches a device's worker: the broker message for (run, device),
    which the state machine's scripts push onto the device's queue in the same script that
    reserves the device (submit, reserve, resend). Nothing else sends a run."""

    def message(self, run_id: str, device_id: str) -> Message:
        """The message that carries the run's id (and nothing else) to the device's queue."""
        ...


class CeleryEnqueuer:
    """`goalfleet.run(run_id)` for `device.<id>`: the task id is the run id, so a redelivered
    message of a run that already succeeded is de-duplicated by Celery; `ignore_result`: the
    run task stores no Celery result (the run record holds it).

    `message` builds what `send_task` would send, for a reservation's script to push:
    Celery's own task message (`app.amqp.create_task_message`) in
    kombu's Redis envelope (`kombu.transport.virtual.Channel.prepare_message` and
    `basic_publish`: base64 body, a fresh delivery tag, the anonymous exchange), onto the list
    kombu's `_put` would push it to (priority 0: the queue's own key, under the app's
    `global_keyprefix`). `tests/unit/test_enqueue.py` holds it equal to what `send_task`
    pushes. Celery's publish signals do not fire for it; the one header the fleet adds at
    publish (the request id, `workers.telemetry.logs.publish_headers`) is added here."""

    def __init__(self, app: Any) -> None:  # noqa: ANN401 - Celery ships no type hints
        self.app = app
        options = app.conf.broker_transport_options or {}
        self._prefix = str(options.get("global_keyprefix") or "")
        mode = app.conf.task_default_delivery_mode
        self._delivery_mode = int(DELIVERY_MODES.get(mode, mode))

    def message(self, run_id: str, device_id: str) -> Message:
        queue = device_queue(device_id)
        task = self.app.amqp.create_task_message(
            run_id,
            RUN_TASK,
            [run_id],
            {},
            ignore_result=True,
            reply_to=self.app.thread_oid,
            argsrepr=repr([run_id]),  # what Celery's saferepr gives for a list of one id
            kwargsrepr="{}",
        )
        headers = {**task.headers, **publish_headers()}
        envelope = {
            "body": base64.b64encode(json.dumps(task.body).encode()).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": headers,
            "properties": {
                **task.properties,
                "delivery_mode": self._delivery_mode,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
        return Message(key=f"{self._prefix}{queue}", payload=json.dumps(envelope))


class RecordingEnqueuer:
    """The fake beside the seam. Its messages take the production path (a reservation's
    script pushes them), onto one list of its own under `keys` instead of a device's Celery
    queue, so no worker consumes them; `sent` reads that list: what was really pushed, in
    order, (run id, device id) each."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.key = keys.queue("recorded-by-the-fake")

    @classmethod
    def of(cls, settings: Settings) -> RecordingEnqueuer:
        """One on `settings`' Redis and key prefix, the store `build(settings)` makes."""
        return cls(store_client(settings), Keys(settings.key_prefix))

    def message(self, run_id: str, device_id: str) -> Message:
        return Message(key=self.key, payload=json.dumps([run_id, device_id]))

    @property
    def sent(self) -> list[tuple[str, str]]:
        raw = self.client.lrange(self.key, 0, -1)
        return [(run, device) for run, device in map(json.loads, reversed(raw))]
