"""Device faults through the fleet (real workers, sim devices with fault plans, and the real
agent-device daemon with no platform tooling): typed statuses, bounded retries, quarantine
after repeated infrastructure failures, and recovery."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaoskit import SECRET_VALUE, chaos_settings
from reportkit import report_path

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.core.model import Outcome, RunStatus
from workers.core.records import RunRecord
from workers.processes import spawn

SIGN_IN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:CHAOS_PW"}},
    "done_when": "Welcome",
    # these runs test the device path's own handling (retries, stale refs): with the decision
    # memory on, a stale remembered action is an invalidation instead (test_memory_loop.py)
    "memory": False,
}
REPORT = report_path("device_faults")
AGENT_DEVICE = Path(__file__).parents[2] / "deploy/agent-device/node_modules/.bin/agent-device"

# Each command (snapshot, press, fill) counts; a sign-in is snapshot, fill, snapshot, press, ...
WORKERS = {
    # DEVICE_IN_USE on the first fill and its first retry: retried (3 at most), then done
    "flaky-1": '{"transient_on": [2, 3]}',
    # DEVICE_IN_USE on the first fill and all 3 retries: errored, typed
    "busy-1": '{"transient_on": [2, 3, 4, 5]}',
    # one stale ref: a re-snapshot, then done
    "stale-once-1": '{"stale_on": [2]}',
    # stale refs on three mutations in a row: errored
    "stale-1": '{"stale_on": [2, 4, 6]}',
    # disconnects mid-run (after a snapshot and a fill): errored, quarantined after 3; its
    # probe (one snapshot) passes, so the quarantine lifts
    "gone-1": '{"disconnect_after": 2}',
}


@pytest.fixture
def fault_fleet(aof_redis: LocalRedis, tmp_path: Path) -> Iterator[LocalFleet]:
    settings = chaos_settings(aof_redis.url, probe_interval_s=2.0)
    fleet = LocalFleet(
        settings, log_dir=tmp_path, extra_env={"GOALFLEET_SECRET_CHAOS_PW": SECRET_VALUE}
    )
    try:
        fleet.start_api()
        fleet.start_scheduler()
        for device, faults in WORKERS.items():
            fleet.start_worker(SimWorker(device, "android", labels={"pool": device}, faults=faults))
        fleet.wait_devices(list(WORKERS), timeout_s=90)
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture
def tool_fleet(aof_redis: LocalRedis, tmp_path: Path) -> Iterator[LocalFleet]:
    """The API and the scheduler of a fleet of its own, for an agent-device worker: its time
    limits leave room for starting the daemon on a loaded machine (the sim fleet's 4 s do not),
    and its lease for a late heartbeat there (a lapsed lease stands the worker down)."""
    settings = chaos_settings(
        aof_redis.url,
        key_prefix="gfc-tool",
        soft_time_limit_s=30,
        time_limit_s=40,
        heartbeat_interval_s=1.0,
        lease_s=10.0,
        probe_interval_s=2.0,
    )
    env = {"GOALFLEET_SECRET_CHAOS_PW": SECRET_VALUE}
    with LocalFleet(settings, log_dir=tmp_path, extra_env=env) as fleet:
        yield fleet.start_all([])


def _run(c: FleetClient, device: str) -> RunRecord:
    return c.wait(c.submit_run({**SIGN_IN, "device": device}).id, timeout_s=60)


def test_device_faults_end_typed_bounded_and_recover(fault_fleet: LocalFleet) -> None:
    """DEVICE_IN_USE is retried a bounded number of times (done when it clears, errored with
    its code when it does not); stale refs cost a re-snapshot and end the run errored after
    three in a row; a device that disconnects mid-run ends runs errored DEVICE_NOT_FOUND, is
    quarantined after three in a row (counted as infrastructure, not decisions) and gets no
    runs, and its quarantine lifts when its probe passes."""
    c = fault_fleet.client()
    numbers: dict[str, object] = {}

    flaky = _run(c, "flaky-1")
    assert flaky.status is RunStatus.DONE, flaky.reason

    busy = _run(c, "busy-1")
    assert busy.status is RunStatus.ERRORED
    assert busy.result is not None
    assert busy.result.error is not None
    assert busy.result.error.code == "DEVICE_IN_USE"
    assert "after 3 retries" in busy.reason

    once = _run(c, "stale-once-1")
    assert once.status is RunStatus.DONE, once.reason
    assert once.result is not None
    assert [s.outcome for s in once.result.steps].count(Outcome.STALE) == 1

    stale = _run(c, "stale-1")
    assert stale.status is RunStatus.ERRORED
    assert stale.result is not None
    assert stale.result.error is not None
    assert stale.result.error.code == "STALE_REF"
    assert [s.outcome for s in stale.result.steps].count(Outcome.STALE) == 3
    assert "stale 3 times in a row" in stale.reason

    gone = [_run(c, "gone-1") for _ in range(3)]
    for r in gone:
        assert r.status is RunStatus.ERRORED
        assert r.result is not None
        assert r.result.error is not None
        assert r.result.error.code == "DEVICE_NOT_FOUND"
        assert r.result.steps  # it got going before the device went away
    # the third failure quarantines in the same atomic write that ends the run; the probe
    # (one snapshot, which this device passes) then lifts it and resets the counter
    t_quarantined = gone[-1].finished_at or time.time()
    deadline = time.monotonic() + 30
    lifted_after = None
    while time.monotonic() < deadline:
        state = {d.info.id: d for d in c.devices()}["gone-1"]
        assert state.decision_failures == 0
        if not state.quarantined and state.infra_failures == 0:
            lifted_after = time.time() - t_quarantined
            break
        time.sleep(0.1)
    assert lifted_after is not None, "the quarantine never lifted"
    again = _run(c, "gone-1")  # placed again once recovered (and fails again: it is flaky)
    assert again.status is RunStatus.ERRORED
    assert again.attempt == 1

    numbers["quarantine_lifted_after_s"] = round(lifted_after, 2)
    numbers["statuses"] = {
        "flaky-1": flaky.status.value,
        "busy-1": f"{busy.status.value} {busy.result.error.code}",
        "stale-once-1": once.status.value,
        "stale-1": f"{stale.status.value} {stale.result.error.code}",
        "gone-1": "errored DEVICE_NOT_FOUND x3, quarantined, recovered",
    }
    _merge_report(numbers)
    c.close()


ANDROID_SDK_VARS = ("ANDROID_HOME", "ANDROID_SDK_ROOT")
"""Where agent-device may also look for adb (platform-tools under the SDK)."""


def _path_without(tool: str, path: str, shadow: Path) -> str:
    """`path` with `tool` taken out: each directory holding it is replaced by a shadow
    directory of links to everything else in it (node and the rest stay reachable)."""
    dirs = []
    for i, d in enumerate(p for p in path.split(os.pathsep) if p):
        here = Path(d)
        if not (here / tool).exists():
            dirs.append(d)
            continue
        copy = shadow / str(i)
        copy.mkdir(parents=True)
        for entry in here.iterdir():
            if entry.name != tool:
                (copy / entry.name).symlink_to(entry)
        dirs.append(str(copy))
    return os.pathsep.join(dirs)


def _merge_report(numbers: dict[str, object]) -> None:
    old = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    REPORT.write_text(json.dumps({**old, **numbers}, indent=2) + "\n")
    print(json.dumps(numbers))  # noqa: T201 - the numbers for docs/reliability.md


@pytest.mark.skipif(
    not AGENT_DEVICE.exists(), reason="agent-device is not installed (make agent-device)"
)
def test_tool_missing_quarantines_and_keeps_runs_pending(
    tool_fleet: LocalFleet, tmp_path: Path
) -> None:
    """A real agent-device worker for an Android device whose adb goes missing after the worker
    started (a worker without adb at all refuses to start: `workers.devices.probe`): every
    run ends errored TOOL_MISSING (a fatal error, not retried), the third quarantines the
    device, its probe keeps failing so the quarantine holds, and a new run for it stays
    pending."""
    env = {k: v for k, v in tool_fleet.env.items() if not k.startswith(ANDROID_SDK_VARS)}
    fake = tmp_path / "adb-at-start"
    fake.mkdir()
    adb = fake / "adb"
    adb.write_text("#!/bin/sh\necho device\n")  # enough for the start-up probe's get-state
    adb.chmod(0o755)
    env["PATH"] = f"{fake}:" + _path_without("adb", env.get("PATH", ""), tmp_path / "path")
    env["HOME"] = str(tmp_path / "home")  # a daemon state dir of its own, not another test's
    argv = [
        sys.executable, "-m", "scheduler", "worker",
        "--device", "nodroid-1", "--backend", "agent-device", "--platform", "android",
        "--target", "android:emulator-5554", "--label", "pool=nodroid", "--loglevel", "WARNING",
    ]  # fmt: skip
    log = tool_fleet.log_dir / "worker-nodroid-1.log"
    tool_fleet.workers["nodroid-1"] = spawn(argv, env=env, log=log)  # stopped with it
    tool_fleet.wait_devices(["nodroid-1"], timeout_s=90)
    adb.unlink()  # the tool goes missing on a running worker
    assert shutil.which("adb", path=env["PATH"]) is None
    c = tool_fleet.client()
    for _ in range(3):
        r = _run(c, "nodroid-1")
        assert r.status is RunStatus.ERRORED
        assert r.result is not None
        assert r.result.error is not None
        assert r.result.error.code == "TOOL_MISSING", r.result.error
        assert "adb" in r.reason
        assert r.attempt == 1
    state = {d.info.id: d for d in c.devices()}["nodroid-1"]
    assert state.quarantined
    assert state.infra_failures == 3
    waiting = c.submit_run({**SIGN_IN, "device": "nodroid-1"})
    time.sleep(3 * tool_fleet.settings.probe_interval_s)  # a few failed probes
    assert c.run(waiting.id).status is RunStatus.QUEUED
    assert c.run(waiting.id).device is None
    assert {d.info.id: d for d in c.devices()}["nodroid-1"].quarantined
    assert c.cancel(waiting.id).status is RunStatus.CANCELLED
    _merge_report({"tool_missing": "errored TOOL_MISSING x3, quarantined, probe keeps failing"})
    c.close()
