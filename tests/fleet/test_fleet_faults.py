"""Faults through the real fleet: a pool child killed mid-run (redelivered, attempt + 1) and a
device failing with infrastructure errors (quarantined, counted apart from decisions)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import SIGN_IN

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet, SimWorker
from workers.core.model import RunStatus
from workers.processes import Child

pytestmark = pytest.mark.fleet


def _children(pid: int) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
    ).stdout
    return [int(p) for p in out.split()]


@pytest.fixture
def extra_worker(fleet: LocalFleet, tmp_path: Path):
    started: list[str] = []

    def start(w: SimWorker) -> Child:
        child = fleet.start_worker(w)
        started.append(w.device)
        fleet.wait_devices([w.device], timeout_s=60)
        return child

    yield start
    for device in started:
        fleet.stop_worker(device)


def test_killed_pool_child_redelivers_with_attempt_plus_one(api: FleetClient, extra_worker):
    """SIGKILL of the pool child mid-run: the message comes back (reject_on_worker_lost), the
    run restarts cleanly with attempt 2 and ends done; its step table is from attempt 2."""
    proc = extra_worker(SimWorker("kill-1", "ios", labels={"pool": "kill"}, latency_scale=0.4))
    run = api.submit_run({**SIGN_IN, "device": "kill-1"})
    deadline = time.monotonic() + 30
    while not api.steps(run.id) and time.monotonic() < deadline:
        time.sleep(0.02)
    children = _children(proc.pid)
    assert children, "no pool child found"
    for child in children:
        os.kill(child, signal.SIGKILL)
    final = api.wait(run.id, timeout_s=60)
    assert final.status is RunStatus.DONE, final.reason
    assert final.attempt == 2
    assert final.result is not None
    assert final.result.attempt == 2
    assert [s.index for s in api.steps(run.id)] == [s.index for s in final.result.steps]


def test_infra_failures_quarantine_the_device(api: FleetClient, extra_worker):
    """A device whose every command fails ends runs errored; after `quarantine_after` (3) in a
    row it is quarantined and new runs for it stay pending."""
    extra_worker(
        SimWorker(
            "broken-1", "android", labels={"pool": "broken"}, faults='{"disconnect_after": 0}'
        )
    )
    for _ in range(3):
        final = api.wait(api.submit_run({**SIGN_IN, "device": "broken-1"}).id, timeout_s=30)
        assert final.status is RunStatus.ERRORED
        assert final.result is not None
        assert final.result.error is not None
        assert final.result.error.code == "DEVICE_NOT_FOUND"
    state = {d.info.id: d for d in api.devices()}["broken-1"]
    assert state.quarantined
    assert state.infra_failures == 3
    assert state.decision_failures == 0
    waiting = api.submit_run({**SIGN_IN, "device": "broken-1"})
    time.sleep(1.5)
    assert api.run(waiting.id).status is RunStatus.QUEUED
    assert api.run(waiting.id).device is None
    assert api.cancel(waiting.id).status is RunStatus.CANCELLED
