"""What one run costs Redis on the worker (the run task's body, claim to finish), counted with
MONITOR as `test_submit_trips` counts a submit: the commands a client sent, not those its
scripts ran.

The cancel flag comes with the claim, then with every row write, which reads it in the same
script, so it costs no round trip of its own; and a step's rows ride on the next step's
decision-memory read (`workers.fleet.outbox`), the last ones on the finish. A batch's
request (stored once, on the batch) is read once per worker process, not once per run."""

from __future__ import annotations

import redis
from test_fleet_store import parts, register  # noqa: F401 - pytest fixtures
from test_submit_trips import wire
from test_tasks import runtime, submit

from scheduler.service.requests import BatchSubmit
from workers.core.model import RunStatus
from workers.core.request import SecretRef
from workers.fleet.keys import Keys
from workers.fleet.tasks import execute_run

EMAIL = {"email": "ada@example.com"}
PASSWORD = {"password": SecretRef(ref="env:PW")}


def test_a_run_is_a_claim_a_memory_read_a_step_and_a_finish(parts, client):
    store, rs, _, fleet = parts
    register(store, "d1")
    rt = runtime(client, rs)
    assert execute_run(rt, submit(fleet, EMAIL)) == "done"  # warm: every script loaded once
    run_id = submit(fleet, EMAIL)
    trips = wire(client, lambda: execute_run(rt, run_id))
    assert store.load(run_id).status is RunStatus.DONE
    steps = len(store.steps(run_id))
    assert steps == 5  # fill, fill, press, then the Welcome screen ends it
    # the claim; per step the memory's read, the rows made since riding on it; the finish
    assert trips == ["EVALSHA"] * (2 + steps), trips


def test_a_batch_request_is_read_once_per_worker(parts, client):
    store, rs, _, fleet = parts
    register(store, "d1")
    rt = runtime(client, rs)
    batch, _ = fleet.submit_batch(
        BatchSubmit(
            goal="Sign in", count=3, inputs=EMAIL, selector={"platform": "ios"}, secrets=PASSWORD
        )
    )
    assert execute_run(rt, reserved(client)) == "done"  # warm; the batch's request read
    trips: list[str] = []
    for _ in range(2):
        fleet.dispatcher.dispatch()  # the device is free again: reserve the next
        run_id = reserved(client)
        trips += wire(client, lambda run_id=run_id: execute_run(rt, run_id))
        assert store.load(run_id).status is RunStatus.DONE
    assert "HGET" not in trips, trips  # the request not again, no cancel flag read alone
    for run_id in batch.runs:
        assert store.load(run_id).request.goal == "Sign in"


def reserved(client: redis.Redis) -> str:
    """The run reserved for device d1."""
    return str(client.hget(Keys("t").device("d1"), "run"))


def test_the_kept_batch_requests_stay_bounded(parts):
    """A long-lived worker keeps at most `BATCH_REQUESTS_KEPT` batches' requests, and each
    run still loads its own batch's request."""
    from workers.fleet.state.runs import BATCH_REQUESTS_KEPT  # noqa: PLC0415 - this test's

    store, rs, _, fleet = parts
    register(store, "d1")
    runs = {}
    for i in range(BATCH_REQUESTS_KEPT + 10):
        batch, _ = fleet.submit_batch(BatchSubmit(goal=f"goal {i}", count=1))
        runs[batch.runs[0]] = f"goal {i}"
    for run_id, goal in runs.items():
        assert rs.load(run_id).request.goal == goal
        assert len(rs._batch_requests) <= BATCH_REQUESTS_KEPT
    for run_id, goal in runs.items():  # again: the evicted ones are read again
        assert rs.load(run_id).request.goal == goal
