"""Device presence through the real fleet: a run dispatched to a worker in warm shutdown is
handed back (not lost), and a second worker process for a device already served refuses to
start without taking the live worker's lease."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis
from conftest import SIGN_IN

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet, SimWorker
from workers.core.model import RunStatus
from workers.fleet.keys import Keys
from workers.processes import spawn
from workers.settings import Settings

pytestmark = pytest.mark.fleet


def test_warm_shutdown_hands_back_the_next_run(api: FleetClient, fleet: LocalFleet):
    """Two runs for a one-device pool; SIGTERM the worker while the first runs. Warm shutdown
    finishes it, the finish wakes the dispatcher (which may reserve the second run for the
    stopping worker), then the worker deregisters: either way the second run is pending again,
    unplaced, and a new worker of the pool runs it to `done`."""
    sel = {"selector": {"labels": {"pool": "stop"}}}
    worker = fleet.start_worker(
        SimWorker("stop-1", "ios", labels={"pool": "stop"}, latency_scale=0.2)
    )
    fleet.wait_devices(["stop-1"], timeout_s=60)
    try:
        first = api.submit_run({**SIGN_IN, **sel})
        second = api.submit_run({**SIGN_IN, **sel})
        deadline = time.monotonic() + 30
        while not api.steps(first.id) and time.monotonic() < deadline:
            time.sleep(0.02)
        worker.signal(signal.SIGTERM, leader_only=True)  # the main process only: warm shutdown
        worker.wait(timeout=60)
        assert api.run(first.id).status is RunStatus.DONE
        moved = api.run(second.id)
        assert moved.status is RunStatus.QUEUED
        assert moved.device is None
        fleet.start_worker(SimWorker("stop-2", "ios", labels={"pool": "stop"}))
        fleet.wait_devices(["stop-2"], timeout_s=60)
        final = api.wait(second.id, timeout_s=60)
        assert final.status is RunStatus.DONE, final.reason
        assert final.device == "stop-2"
    finally:
        fleet.stop_worker("stop-1")
        fleet.stop_worker("stop-2")


def test_second_worker_for_a_served_device_refuses_to_start(
    api: FleetClient, fleet: LocalFleet, settings: Settings, db: redis.Redis, tmp_path: Path
):
    """Same device id, same worker name, another process: it waits one lease period, exits
    with DEVICE_TAKEN, and the first worker's lease survives its shutdown; the device keeps
    running runs."""
    w = SimWorker("dup-1", "ios", labels={"pool": "dup"})
    fleet.start_worker(w)
    fleet.wait_devices(["dup-1"], timeout_s=60)
    lease = Keys(settings.key_prefix).lease("dup-1")
    holder = db.get(lease)
    log = tmp_path / "dup.log"
    dup = spawn(w.argv(), env=fleet.env, log=log, name="dup-1")
    try:
        rc = dup.wait(timeout=settings.lease_s + 60)
        assert rc != 0
        assert "DEVICE_TAKEN" in log.read_text() or "held by another" in log.read_text()
        assert db.get(lease) == holder
        time.sleep(settings.lease_s)
        assert {d.info.id: d for d in api.devices()}["dup-1"].alive
        run = api.wait(api.submit_run({**SIGN_IN, "device": "dup-1"}).id, timeout_s=60)
        assert run.status is RunStatus.DONE, run.reason
    finally:
        dup.stop(grace_s=0, sig=signal.SIGKILL)
        fleet.stop_worker("dup-1")
