"""What docs/fleet.md promises of the Celery app, read from a task as Celery resolves it."""

from __future__ import annotations

from workers.fleet.celery_app import make_celery
from workers.settings import Settings


def test_a_hard_time_limit_requeues_and_other_failures_are_acked() -> None:
    """acks late; a pool child lost or killed at the hard time limit puts the message back
    (`task_acks_on_timeout` off), any other failure is acked."""
    app = make_celery(Settings(redis_url="redis://127.0.0.1:9/0"))

    def body() -> None:
        return None

    task = app.task(name="t")(body)
    assert (task.acks_late, task.reject_on_worker_lost) == (True, True)
    assert (task.acks_on_timeout, task.acks_on_failure) == (False, True)
