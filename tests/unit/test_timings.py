"""The fleet's published timings (workers/fleet/timings.py) against a real Redis."""

from __future__ import annotations

import json

import pytest
import redis
from structlog.testing import capture_logs

from workers.fleet.keys import Keys
from workers.fleet.timings import FleetTimings, TimingsMismatchError, checked
from workers.settings import Settings

BASE = Settings(
    redis_url="redis://unused", soft_time_limit_s=60, time_limit_s=90, visibility_timeout_s=120
)


def test_the_first_worker_defines_the_fleets_timings_and_others_must_match(client: redis.Redis):
    """With nothing published, a worker's timings become the fleet's; a worker with the same
    ones starts; one with a shorter visibility timeout is refused and writes nothing."""
    timings = FleetTimings(client, Keys("t"))
    timings.publish(BASE, role="worker", who="w@a")
    timings.publish(BASE, role="worker", who="w@b")
    assert json.loads(client.hget("t:timings", "fleet") or "") == checked(BASE)
    short = BASE.model_copy(update={"visibility_timeout_s": 100})
    with pytest.raises(TimingsMismatchError) as err:
        timings.publish(short, role="worker", who="w@c")
    assert str(err.value).startswith("GOALFLEET_VISIBILITY_TIMEOUT_S is 100 here but 120 in")
    assert err.value.code == "TIMINGS_MISMATCH"
    assert sorted(client.hkeys("t:timings")) == ["fleet", "w@a", "w@b"]


def test_the_api_redefines_the_fleets_timings_and_says_so(client: redis.Redis):
    """The API (or the scheduler) started with new timings makes them the fleet's and logs the
    change once; workers are then checked against the new ones."""
    timings = FleetTimings(client, Keys("t"))
    timings.publish(BASE, role="worker", who="w@a")
    longer = BASE.model_copy(update={"visibility_timeout_s": 200})
    with capture_logs() as logs:
        timings.publish(longer, role="api", who="api@h:1")
        timings.publish(longer, role="scheduler", who="scheduler@h")
    assert [entry["event"] for entry in logs] == ["fleet_timings_changed"]
    assert json.loads(client.hget("t:timings", "fleet") or "") == checked(longer)
    with pytest.raises(TimingsMismatchError):
        timings.publish(BASE, role="worker", who="w@a")
    timings.publish(longer, role="worker", who="w@a")
