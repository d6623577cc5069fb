"""A flood of unplaceable runs never holds back placeable ones (issue 16 point 3), with real
worker processes: 1,000 runs wait for a pool whose only device died; 20 runs for a live pool,
submitted after them, all finish. (The old dispatcher looked at the first 1,000 pending runs
only, so the 18 runs the submit's fast path could not place waited for ever.) How much the
flood slows the 20 down is measured by `python -m bench.bench_flood`, not here."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SIGN_IN, TOKEN
from fleetkit import quick_settings

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys

LIVE = [SimWorker(f"live-{i}", "ios", "17.5", "iPhone 15", {"pool": "live"}) for i in (1, 2)]
DOOMED = SimWorker("doomed-1", "ios", "17.5", "iPhone 15", {"pool": "doomed"})
FLOOD = 1000
PLACEABLE = 20


@pytest.fixture(scope="module")
def flood_fleet(
    redis_server: LocalRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalFleet]:
    settings = quick_settings(redis_server.url, key_prefix="gfflood", token=TOKEN)
    logs: Path = tmp_path_factory.mktemp("flood-logs")
    with LocalFleet(
        settings, log_dir=logs, extra_env={"GOALFLEET_SECRET_FLEET_PW": "pw-flood"}
    ) as f:
        yield f.start_all([*LIVE, DOOMED], timeout_s=90)


def test_twenty_placeable_runs_finish_behind_a_thousand_unplaceable(
    flood_fleet: LocalFleet,
) -> None:
    flood_fleet.stop_worker(DOOMED.device, sig=signal.SIGKILL)  # registered, never back
    with flood_fleet.client() as api:
        deadline = time.monotonic() + 30
        while any(d.alive for d in api.devices() if d.info.id == DOOMED.device):
            assert time.monotonic() < deadline, "the dead worker's lease never lapsed"
            time.sleep(0.2)
        body = {**SIGN_IN, "selector": {"labels": {"pool": "doomed"}}, "count": FLOOD}
        flood = api.submit_batch(body)
        assert flood.total == FLOOD
        live = {**SIGN_IN, "selector": {"labels": {"pool": "live"}}}
        ids = [api.submit_run(live).id for _ in range(PLACEABLE)]
        ended = [_wait(api, rid) for rid in ids]
        assert [r.status for r in ended] == [RunStatus.DONE] * PLACEABLE
        assert {r.device for r in ended} <= {w.device for w in LIVE}
    db = redis_client(flood_fleet.settings.redis_url)
    assert db.zcard(Keys("gfflood").pending) == FLOOD  # the flood waits on, untouched


def _wait(api: FleetClient, run_id: str) -> RunRecord:
    return api.wait(run_id, timeout_s=120)
