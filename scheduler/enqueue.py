"""The seam between the scheduler and the broker: put one run id on one device's queue."""

from __future__ import annotations

from typing import Any, Protocol

from workers.fleet.keys import RUN_TASK, device_queue


class Enqueuer(Protocol):
    def enqueue(self, run_id: str, device_id: str) -> None:
        """Send the run's id (and nothing else) to the device's queue."""
        ...


class CeleryEnqueuer:
    """Sends `goalfleet.run(run_id)` to `device.<id>`; the task id is the run id, so a
    redelivered message of a run that already succeeded is de-duplicated by Celery.

    `ignore_result`: the run task stores no Celery result (the run record holds it), and
    without it Celery subscribes the sender to the task's result channel on every send
    (SUBSCRIBE + UNSUBSCRIBE around the LPUSH: two more Redis commands on the submit's hot
    path, as `Task.apply_async` of an `ignore_result` task would not)."""

    def __init__(self, app: Any) -> None:  # noqa: ANN401 - Celery ships no type hints
        self.app = app

    def enqueue(self, run_id: str, device_id: str) -> None:
        self.app.send_task(
            RUN_TASK,
            args=[run_id],
            queue=device_queue(device_id),
            task_id=run_id,
            ignore_result=True,
        )


class RecordingEnqueuer:
    """The fake beside the seam: remembers (run id, device id) pairs; can be told to fail."""

    def __init__(self, *, fail: bool = False) -> None:
        self.sent: list[tuple[str, str]] = []
        self.fail = fail

    def enqueue(self, run_id: str, device_id: str) -> None:
        if self.fail:
            raise ConnectionError("broker down (RecordingEnqueuer told to fail)")
        self.sent.append((run_id, device_id))
