"""The seam between the scheduler and the broker: put one run id on one device's queue."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any, Protocol

from kombu.entity import DELIVERY_MODES

from workers.fleet.keys import RUN_TASK, device_queue
from workers.fleet.state.queue import Message
from workers.telemetry.logs import publish_headers


class Enqueuer(Protocol):
    def enqueue(self, run_id: str, device_id: str) -> None:
        """Send the run's id (and nothing else) to the device's queue."""
        ...

    def message(self, run_id: str, device_id: str) -> Message | None:
        """The message `enqueue` would send, for the submit script to push in the round trip
        that reserves the device; None when this enqueuer cannot build one (the submit then
        calls `enqueue` after the reservation)."""
        ...


class CeleryEnqueuer:
    """Sends `goalfleet.run(run_id)` to `device.<id>`; the task id is the run id, so a
    redelivered message of a run that already succeeded is de-duplicated by Celery.

    `ignore_result`: the run task stores no Celery result (the run record holds it), and
    without it Celery subscribes the sender to the task's result channel on every send
    (SUBSCRIBE + UNSUBSCRIBE around the LPUSH: two more Redis commands on the submit's hot
    path, as `Task.apply_async` of an `ignore_result` task would not).

    `message` builds the same message without sending it, for the submit's script to push
    with the reservation: Celery's own task message (`app.amqp.create_task_message`) in
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

    def enqueue(self, run_id: str, device_id: str) -> None:
        self.app.send_task(
            RUN_TASK,
            args=[run_id],
            queue=device_queue(device_id),
            task_id=run_id,
            ignore_result=True,
        )

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
    """The fake beside the seam: remembers (run id, device id) pairs; can be told to fail.
    It builds no messages, so a submit calls `enqueue` after reserving."""

    def __init__(self, *, fail: bool = False) -> None:
        self.sent: list[tuple[str, str]] = []
        self.fail = fail

    def enqueue(self, run_id: str, device_id: str) -> None:
        if self.fail:
            raise ConnectionError("broker down (RecordingEnqueuer told to fail)")
        self.sent.append((run_id, device_id))

    def message(self, run_id: str, device_id: str) -> Message | None:  # noqa: ARG002 - the seam's
        return None
