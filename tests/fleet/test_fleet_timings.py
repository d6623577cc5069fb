"""A worker whose visibility timeout or time limits differ from its fleet's refuses to start:
one line, exit 2, nothing registered (a worker with a shorter visibility timeout would put
other devices' in-flight runs back on their queues). Real API and scheduler threads, real
`goalfleet worker` processes, a Redis of the test's own."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import TOKEN
from fleetkit import quick_settings

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.fleet.keys import Keys
from workers.fleet.timings import checked

pytestmark = pytest.mark.fleet

EXIT_BAD_INPUT = 2


@pytest.fixture
def timed_fleet(redis_binary: str, tmp_path: Path) -> Iterator[LocalFleet]:
    """The API and the scheduler of fleet `tm` (they publish its timings), no worker yet."""
    with LocalRedis(binary=redis_binary) as server:
        settings = quick_settings(server.url, key_prefix="tm", token=TOKEN)
        with LocalFleet(settings, log_dir=tmp_path, extra_env={}) as fleet:
            yield fleet.start_all([])


def _worker(fleet: LocalFleet, device: str, **env: str) -> subprocess.CompletedProcess[str]:
    argv = SimWorker(device, "ios").argv()
    return subprocess.run(
        argv,
        env={**fleet.env, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("setting", "value", "fleets"),
    [
        ("GOALFLEET_VISIBILITY_TIMEOUT_S", "100", "120"),
        ("GOALFLEET_TIME_LIMIT_S", "80", "90"),
        ("GOALFLEET_SOFT_TIME_LIMIT_S", "50", "60"),
    ],
)
def test_a_worker_with_other_timings_refuses_to_start(
    timed_fleet: LocalFleet, setting: str, value: str, fleets: str
) -> None:
    """The fleet publishes 60 / 90 / 120 s (soft, hard, visibility); a worker with one of them
    different exits 2 with one line naming the setting, both values and the fix, and leaves no
    registration behind; the fleet's published timings are unchanged."""
    keys = Keys(timed_fleet.settings.key_prefix)
    db = redis.Redis.from_url(timed_fleet.settings.redis_url, decode_responses=True)
    try:
        fleet_timings = db.hget(keys.timings, "fleet")
        assert json.loads(fleet_timings or "{}") == checked(timed_fleet.settings)
        done = _worker(timed_fleet, "odd-1", **{setting: value})
        assert done.returncode == EXIT_BAD_INPUT, done.stderr
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"goalfleet worker: {setting} is {value} here but {fleets} ")
        assert "start this worker with the fleet's" in lines[0]
        assert not db.sismember(keys.devices, "odd-1")
        assert not db.exists(keys.device("odd-1"))
        assert db.hget(keys.timings, "fleet") == fleet_timings
        assert not db.hexists(keys.timings, "w@odd-1")
    finally:
        db.close()


def test_a_worker_with_the_fleets_timings_starts(timed_fleet: LocalFleet) -> None:
    """The same timings: the worker registers its device and publishes its own entry."""
    timed_fleet.start_worker(SimWorker("same-1", "ios"))
    timed_fleet.wait_devices(["same-1"], timeout_s=90)
    db = redis.Redis.from_url(timed_fleet.settings.redis_url, decode_responses=True)
    try:
        mine = json.loads(db.hget(Keys("tm").timings, "w@same-1") or "{}")
    finally:
        db.close()
    assert mine["role"] == "worker"
    assert mine["pid"] != os.getpid()
    assert {k: mine[k] for k in checked(timed_fleet.settings)} == checked(timed_fleet.settings)
