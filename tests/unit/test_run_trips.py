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
from workers.core.model import ActionResult, InputValue, Platform, RunStatus, Snapshot
from workers.core.ports import Device, DevicePort
from workers.core.request import SecretRef
from workers.devices.sim.device import make_sim_device
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


class CancelledAt(Device):
    """The sim sign-in device; its `at`-th action first asks the store to cancel the run (a
    person's cancel arriving while that step runs)."""

    def __init__(self, cancel: object, at: int) -> None:
        self.inner = make_sim_device("sim:signin-ios")
        self.cancel = cancel
        self.at = at
        self.acted = 0

    @property
    def platform(self) -> Platform:
        return self.inner.platform

    def snapshot(self) -> Snapshot:
        return self.inner.snapshot()

    def _acting(self) -> None:
        self.acted += 1
        if self.acted == self.at:
            self.cancel()  # type: ignore[operator]

    def press(self, pinned_ref: str) -> ActionResult:
        self._acting()
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self._acting()
        return self.inner.fill(pinned_ref, value)

    def close(self) -> None:
        self.inner.close()


def test_a_cancel_during_a_step_stops_the_run_before_the_next(parts, client):
    """Requested while step 2 acts: step 2's row is written, step 3 never starts."""
    store, rs, _, fleet = parts
    register(store, "d1")
    run_id = submit(fleet, EMAIL)
    devices: list[DevicePort] = []

    def open_device(_rid: str) -> DevicePort:
        devices.append(CancelledAt(lambda: store.cancel(run_id), at=2))
        return devices[-1]

    rt = runtime(client, rs, open_device=open_device)
    assert execute_run(rt, run_id) == "cancelled"
    final = store.load(run_id)
    assert final.status is RunStatus.CANCELLED
    assert [row.index for row in store.steps(run_id)] == [1, 2]
    assert len(final.result.steps) == 2


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
