"""A batch stores its request once and its runs reference it: 1,000 runs of a ~10 KB request
grow Redis by well under 1,000 copies of it, and every run still reads back (through the API,
and as a worker loads it) with its whole request."""

from __future__ import annotations

import pytest
import redis
from conftest import TOKEN, create
from fastapi import FastAPI
from fastapi.testclient import TestClient

from scheduler.local.redis import LocalRedis
from scheduler.service.requests import BatchSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.runs import RunStore
from workers.settings import Settings

pytestmark = pytest.mark.fleet

AUTH = {"Authorization": f"Bearer {TOKEN}"}
INPUTS = {f"field{i}": f"{i}" * 1000 for i in range(10)}
"""Ten inputs of 1,000 characters: a request of ~10 KB."""


def test_a_batch_stores_its_request_once(own_redis: tuple[LocalRedis, redis.Redis]) -> None:
    """count 1000 x ~10 KB: accepted (at the default 10 MB limit), Redis grows by less than a
    tenth of 1,000 copies; a run read through the API and loaded as a worker loads it has the
    whole request; the runs' own hashes hold none of it."""
    server, db = own_redis
    keys = Keys("gfr")
    DeviceRegistry(db, keys).register(
        DeviceInfo(id="r-1", platform=Platform.IOS), "w@r-1", lease_s=3600
    )
    settings = Settings(redis_url=server.url, key_prefix="gfr", api_tokens=[TOKEN])
    app: FastAPI = create(settings, enqueuer=RecordingEnqueuer())  # type: ignore[assignment]
    client = TestClient(app)
    body = {"goal": "Sign in", "inputs": INPUTS, "count": 1000}
    copy = len(BatchSubmit.model_validate(body).goal_request().model_dump_json())
    used = int(db.info("memory")["used_memory"])
    resp = client.post("/v1/batches", json=body, headers=AUTH)
    assert resp.status_code == 201, resp.text[:300]
    index = int(db.memory_usage(keys.runs, samples=0) or 0)  # the run list: 1,000 entries
    growth = int(db.info("memory")["used_memory"]) - used - index
    print(f"batch of 1000 x {copy} B request: Redis grew {growth / 1e6:.2f} MB")  # noqa: T201 - the figure
    assert growth < 1000 * copy / 10, growth

    run_ids = resp.json()["runs"]
    assert len(run_ids) == 1000
    for run_id in (run_ids[0], run_ids[-1]):
        assert db.hget(keys.run(run_id), "request") == ""
        read = client.get(f"/v1/runs/{run_id}", headers=AUTH).json()
        assert read["request"]["inputs"] == INPUTS
        loaded = RunStore(db, keys).load(run_id)
        assert loaded is not None
        assert dict(loaded.request.inputs) == INPUTS
    listed = client.get(f"/v1/batches/{resp.json()['id']}/runs", headers=AUTH).json()
    assert len(listed) == 1000
    assert all(r["request"]["inputs"] == INPUTS for r in listed)
