"""Runs through the real fleet: API over HTTP → scheduler → Celery worker process per device."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import SIGN_IN

from scheduler.client.api_client import FleetClient
from workers.core.model import RunStatus

pytestmark = pytest.mark.fleet


def test_run_completes_on_the_exact_device(api: FleetClient):
    """A run sent to one device runs there, ends done, and its steps are stored."""
    run = api.submit_run({**SIGN_IN, "device": "ios-2"})
    assert run.status in {RunStatus.QUEUED, RunStatus.RUNNING}
    final = api.wait(run.id, timeout_s=60)
    assert final.status is RunStatus.DONE, final.reason
    assert final.device == "ios-2"
    assert final.worker == "w@ios-2"
    assert final.attempt == 1
    assert final.result is not None
    assert final.result.device_id == "ios-2"
    rows = api.steps(run.id)
    assert [r.index for r in rows] == [s.index for s in final.result.steps]
    assert len(rows) >= 4
    assert api.steps(run.id, after=2)[0].index == 3


def test_selector_routes_to_an_idle_matching_device(api: FleetClient):
    """Selectors pick by platform, os version prefix and labels."""
    a = api.submit_run({**SIGN_IN, "selector": {"platform": "ios", "os_version": "16.*"}})
    b = api.submit_run({**SIGN_IN, "selector": {"platform": "android", "labels": {"pool": "a"}}})
    assert api.wait(a.id, timeout_s=60).device == "ios-2"
    assert api.wait(b.id, timeout_s=60).device == "android-1"


def test_busy_device_keeps_runs_pending_not_elsewhere(api: FleetClient):
    """Runs for a busy device wait in the store and run there one after another."""
    runs = [api.submit_run({**SIGN_IN, "device": "slow-1"}) for _ in range(2)]
    second = api.run(runs[1].id)
    assert second.status is RunStatus.QUEUED
    assert second.device is None  # pending in our store, not behind the busy device's queue
    finals = [api.wait(r.id, timeout_s=60) for r in runs]
    assert [f.device for f in finals] == ["slow-1", "slow-1"]
    assert finals[0].finished_at <= finals[1].started_at


def test_step_rows_stream_while_the_run_is_running(api: FleetClient):
    """Step rows appear while the run is still running (live tail with after=N)."""
    run = api.submit_run({**SIGN_IN, "device": "slow-1"})
    seen_live = 0
    deadline = time.monotonic() + 60
    last = 0
    while time.monotonic() < deadline:
        current = api.run(run.id)
        rows = api.steps(run.id, after=last)
        if rows:
            last = rows[-1].index
            if current.status is RunStatus.RUNNING:
                seen_live += len(rows)
        if current.status.terminal:
            break
        time.sleep(0.05)
    assert api.run(run.id).status is RunStatus.DONE
    assert seen_live >= 1


def test_cancel_a_running_run(api: FleetClient):
    """Cancel is cooperative: the run stops between steps and ends cancelled."""
    run = api.submit_run({**SIGN_IN, "device": "slow-1"})
    deadline = time.monotonic() + 30
    while not api.steps(run.id) and time.monotonic() < deadline:
        time.sleep(0.02)
    api.cancel(run.id)
    final = api.wait(run.id, timeout_s=30)
    assert final.status is RunStatus.CANCELLED
    assert final.result is not None
    assert len(final.result.steps) < 5


def test_cancel_a_queued_run(api: FleetClient):
    """A run still pending is cancelled at once and never starts."""
    first = api.submit_run({**SIGN_IN, "device": "slow-1"})
    queued = api.submit_run({**SIGN_IN, "device": "slow-1"})
    out = api.cancel(queued.id)
    assert out.status is RunStatus.CANCELLED
    api.wait(first.id, timeout_s=60)
    time.sleep(0.3)
    again = api.run(queued.id)
    assert again.status is RunStatus.CANCELLED
    assert again.attempt == 0
    assert again.started_at is None


def test_batch_one_run_per_matching_device(api: FleetClient):
    """A batch fans out to every matching device and counts statuses in our store."""
    batch = api.submit_batch({**SIGN_IN, "selector": {"platform": "ios"}})
    assert batch.total == 2
    done = api.wait_batch(batch.id, timeout_s=60)
    assert done.complete
    assert done.counts == {"done": 2}
    runs = api.batch_runs(batch.id)
    assert sorted(r.device for r in runs) == ["ios-1", "ios-2"]


def test_batch_with_count_spreads_over_matching_devices(api: FleetClient):
    """`count` runs routed by the selector spread over the idle matching devices."""
    batch = api.submit_batch({**SIGN_IN, "selector": {"labels": {"pool": "a"}}, "count": 6})
    done = api.wait_batch(batch.id, timeout_s=90)
    assert done.counts == {"done": 6}
    devices = {r.device for r in api.batch_runs(batch.id)}
    assert devices == {"ios-1", "android-1"}


def test_missing_secret_ends_errored_naming_the_variable(api: FleetClient):
    """A secret the worker does not have ends the run errored, naming what to set."""
    body = {**SIGN_IN, "device": "ios-1", "secrets": {"password": {"ref": "env:NOT_SET"}}}
    final = api.wait(api.submit_run(body).id, timeout_s=60)
    assert final.status is RunStatus.ERRORED
    assert "GOALFLEET_SECRET_NOT_SET" in final.reason


def test_no_two_runs_at_once_on_one_device(api: FleetClient, session_logs: Path):
    """Many runs over the fleet at once: every device's sessions never overlap."""
    batch = api.submit_batch({**SIGN_IN, "selector": {}, "count": 16})
    api.wait_batch(batch.id, timeout_s=120)
    for log in session_logs.glob("*.log"):
        open_now = 0
        for line in log.read_text().splitlines():
            what = line.split()[0]
            open_now += 1 if what == "open" else -1
            assert 0 <= open_now <= 1, f"{log.name}: overlapping device sessions"


@pytest.mark.parametrize("device", ["ios-1", "android-1"])
def test_devices_report_health_and_idle(api: FleetClient, device: str):
    """Devices list capabilities, liveness and load."""
    states = {d.info.id: d for d in api.devices()}
    d = states[device]
    assert d.alive
    assert d.info.labels["pool"] == "a"
    assert not d.quarantined
