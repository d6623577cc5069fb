"""A run's step rows wait in its outbox for a round trip it makes anyway (`workers.fleet.outbox`),
and still every row is stored before the device is acted on again: the device here reads the
store at every action and finds each row of the steps before it. A cancel the store shows at
that write refuses the action about to be made."""

from __future__ import annotations

import pytest
from test_fleet_store import parts, register  # noqa: F401 - pytest fixtures
from test_tasks import runtime, submit

from scheduler.service.requests import RunSubmit
from scheduler.store.runs import FleetStore
from workers.core.model import ActionResult, InputValue, Platform, RunStatus, Snapshot
from workers.core.ports import Device, DevicePort
from workers.core.request import SecretRef
from workers.devices.sim.device import make_sim_device
from workers.fleet.tasks import execute_run

EMAIL = {"email": "ada@example.com"}
PASSWORD = {"password": SecretRef(ref="env:PW")}


class Witness(Device):
    """The sim sign-in device; at each action it reads which rows the store holds. It asks the
    store to cancel the run at its `cancel_at`-th snapshot (a person's cancel arriving while a
    step is being decided), or during its `cancel_acting`-th action (while a step acts)."""

    def __init__(
        self, store: FleetStore, run_id: str, cancel_at: int = 0, cancel_acting: int = 0
    ) -> None:
        self.inner = make_sim_device("sim:signin-ios")
        self.store = store
        self.run_id = run_id
        self.cancel_at = cancel_at
        self.cancel_acting = cancel_acting
        self.looks = 0
        self.stored_at_action: list[list[int]] = []

    @property
    def platform(self) -> Platform:
        return self.inner.platform

    def snapshot(self) -> Snapshot:
        self.looks += 1
        if self.looks == self.cancel_at:
            self.store.cancel(self.run_id)
        return self.inner.snapshot()

    def _acting(self) -> None:
        self.stored_at_action.append([r.index for r in self.store.steps(self.run_id)])
        if len(self.stored_at_action) == self.cancel_acting:
            self.store.cancel(self.run_id)

    def press(self, pinned_ref: str) -> ActionResult:
        self._acting()
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        self._acting()
        return self.inner.fill(pinned_ref, value)

    def close(self) -> None:
        self.inner.close()


def _run(
    parts,
    client,
    *,
    cancel_at: int = 0,
    cancel_acting: int = 0,
    warm: bool = False,
    memory: bool = True,
) -> tuple[str, Witness]:
    store, rs, _, fleet = parts
    register(store, "d1")
    if warm:  # a done run first: the next one decides every step from the memory
        assert execute_run(runtime(client, rs), submit(fleet, EMAIL)) == "done"
    request = RunSubmit(goal="Sign in", device="d1", inputs=EMAIL, secrets=PASSWORD, memory=memory)
    run_id = fleet.submit_run(request)[0].id
    devices: list[Witness] = []

    def open_device(_rid: str) -> DevicePort:
        devices.append(Witness(store, run_id, cancel_at, cancel_acting))
        return devices[-1]

    status = execute_run(runtime(client, rs, open_device=open_device), run_id)
    return status, devices[0]


@pytest.mark.parametrize(
    ("warm", "memory"),
    [(False, False), (False, True), (True, True)],
    ids=["no-memory", "memory-misses", "from-memory"],
)
def test_every_row_is_stored_before_the_next_action(
    parts, client, *, warm: bool, memory: bool
) -> None:
    """Without memory each row is written alone just before the next action; with it, it
    rides on the next step's memory read, which comes before that step's action."""
    status, device = _run(parts, client, warm=warm, memory=memory)
    assert status == "done"
    # action k (of steps 1-4) finds rows 1..k-1 stored: each written before it
    assert device.stored_at_action == [list(range(1, k)) for k in range(1, 5)]
    store = parts[0]
    assert [r.index for r in store.steps(device.run_id)] == [1, 2, 3, 4, 5]  # the last two: finish


def test_a_cancel_seen_at_the_row_write_refuses_the_action_about_to_be_made(parts, client):
    """Cancelled while step 3 is being decided: step 2's row is written before step 3's
    action, that write reads the cancel, and the action is not made."""
    status, device = _run(parts, client, cancel_at=3, memory=False)
    assert status == "cancelled"
    assert len(device.stored_at_action) == 2  # steps 1 and 2 acted; step 3 did not
    final = parts[0].load(device.run_id)
    assert final.status is RunStatus.CANCELLED
    assert [r.index for r in parts[0].steps(device.run_id)] == [1, 2]
    assert [r.index for r in final.result.steps] == [1, 2]


@pytest.mark.parametrize("memory", [False, True], ids=["no-memory", "memory"])
def test_a_cancel_during_a_step_stops_the_run_before_the_next_action(
    parts, client, *, memory: bool
) -> None:
    """Requested while step 2 acts: step 2's row is written (with the next write, which reads
    the cancel), and step 3 makes no action."""
    status, device = _run(parts, client, cancel_acting=2, memory=memory)
    assert status == "cancelled"
    assert len(device.stored_at_action) == 2
    final = parts[0].load(device.run_id)
    assert final.status is RunStatus.CANCELLED
    assert [row.index for row in parts[0].steps(device.run_id)] == [1, 2]
    assert len(final.result.steps) == 2


@pytest.mark.parametrize("memory", [False, True], ids=["no-memory", "memory"])
def test_a_cancel_before_the_first_action_refuses_it(parts, client, *, memory: bool) -> None:
    """Cancelled after the claim, while the first step is being decided (as while the app
    was being prepared): the flag the claim read is stale, so the first action reads it
    again (alone, or with the first step's memory read), and is not made."""
    status, device = _run(parts, client, cancel_at=1, memory=memory)
    assert status == "cancelled"
    assert device.stored_at_action == []  # no action at all
    assert parts[0].load(device.run_id).status is RunStatus.CANCELLED
