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
    """`goalfleet.run(run_id)` onto `device.<id>` through Celery's public API: the task id is
    the run id (a worker's log lines for it carry it); `ignore_result`: the run task stores no
    Celery result (the run record holds it), so no result channel is subscribed.

    Three of `send_task`'s documented options cut its CPU, none its message (docs/benchmarks.md
    §22, §24): `argsrepr` and `kwargsrepr` (what logs and events show of the arguments), given
    as Celery would write them; `declare=[]`: the message goes to the queue's list by name (a
    direct exchange is sent as the anonymous one), so the sender declares nothing, where Celery
    would re-check the queue's declaration on every send (the worker declares its own queue
    when it starts consuming); `producer`, a caller's held producer, else one from Celery's
    pool."""
    app.send_task(
        RUN_TASK,
        args=[run_id],
        argsrepr=repr([run_id]),
        kwargsrepr="{}",
        queue=device_queue(device_id),
        task_id=run_id,
        ignore_result=True,
        declare=[],
        producer=producer,
    )


def send_again(
    app: Any,  # noqa: ANN401 - Celery ships no type hints
    run_id: str,
    device_id: str,
    *,
    give_up: Callable[[], bool],
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Send a run this worker still holds to its own device again, waiting through a Redis
    outage with backoff until sent, or until `give_up()` (the lease is lost or the worker is
    stopping: the lapsed sweep re-pends the run then). True once sent."""
    n = 0
    while True:
        if give_up():
            log.warning("run_not_sent_again", run_id=run_id, device_id=device_id,
                        hint="the lapsed sweep re-pends it once the lease is gone")  # fmt: skip
            return False
        try:
            send_run(app, run_id, device_id)
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
