"""Sending a run's message: the one send of the fleet's delivery protocol (docs/design.md,
"One delivery protocol").

The broker delivers each message at most once (`workers.fleet.celery_app`: popped on receipt,
acknowledged early). Every redelivery is the fleet's, and each case has one owner:

- a reservation whose message never left or was lost: the scheduler's orphan sweep sends it
  again (`scheduler.dispatch.dispatcher`);
- a run whose worker died or lost its lease: the scheduler's lapsed sweep re-pends it;
- a run whose pool child died, hit its hard time limit, or waited out a Redis outage longer
  than a run may wait, while its worker still holds the lease: that worker sends it to its own
  device again (`send_again`), and the claim counts the attempt (past the cap it ends
  `errored`). Should the worker lose the lease first, the lapsed sweep takes over.

A duplicate of any of them is skipped by the claim (a compare-and-set on the run's state).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from workers.core.backoff import Backoff
from workers.fleet.keys import RUN_TASK, device_queue
from workers.fleet.outages import describe, is_outage

log = structlog.stdlib.get_logger("goalfleet.worker")

_BACKOFF = Backoff(base_s=0.1, cap_s=2.0)


def send_run(
    app: Any,  # noqa: ANN401 - Celery ships no type hints
    run_id: str,
    device_id: str,
    *,
    producer: Any = None,  # noqa: ANN401 - a kombu Producer; kombu ships no type hints
) -> None:
    """`goalfleet.run(run_id)` onto `device.<id>` with Celery's documented message API
    (`app.amqp`): `create_task_message` makes the task message (protocol 2; the task id is
    the run id, so a worker's log lines for it carry it) and `send_task_message` publishes it
    (the `before_task_publish` hooks run, the request id header among them), on `producer`
    (a caller's held one, else one from Celery's pool).

    These are the two calls `send_task` makes. Around them `send_task` routes (the queue
    here is named), merges options, and makes a result object (no Celery result is kept:
    `ignore_result`, the run record holds it): a third of a send's CPU, which this skips, as
    it skips `saferepr` of the arguments by giving `argsrepr` and `kwargsrepr` as Celery
    would write them, and the queue's declaration by `declare=[]` (a direct exchange is sent
    as the anonymous one, straight to the queue's list; the worker declares its own queue
    when it consumes). The message is the one `send_task` sends, minus a `reply_to` for the
    result nobody reads (docs/benchmarks.md §22, §24)."""
    amqp = app.amqp
    message = amqp.create_task_message(
        run_id,
        RUN_TASK,
        [run_id],
        {},
        argsrepr=repr([run_id]),
        kwargsrepr="{}",
        ignore_result=True,
    )
    with app.producer_or_acquire(producer) as held:
        amqp.send_task_message(held, RUN_TASK, message, queue=device_queue(device_id), declare=[])


def send_again(
    send: Callable[[str, str], object],
    run_id: str,
    device_id: str,
    *,
    give_up: Callable[[], bool],
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Send a run this worker still holds to its own device again (`send`: `send_run` on the
    worker's app, given run id and device id), waiting through a Redis
    outage with backoff until sent, or until `give_up()` (the lease is lost or the worker is
    stopping: the lapsed sweep re-pends the run then). True once sent."""
    n = 0
    while True:
        if give_up():
            log.warning("run_not_sent_again", run_id=run_id, device_id=device_id,
                        hint="the lapsed sweep re-pends it once the lease is gone")  # fmt: skip
            return False
        try:
            send(run_id, device_id)
        except Exception as exc:
            if not is_outage(exc):
                raise
            if n == 0:
                log.warning("run_send_again_waiting", run_id=run_id, error=describe(exc))
            sleep(_BACKOFF.delay(n))
            n += 1
        else:
            log.warning("run_sent_again", run_id=run_id, device_id=device_id)
            return True
