"""A batch stores its request once and its runs reference it: 1,000 runs of a ~10 KB request
grow Redis by well under 1,000 copies of it, and every run still reads back (through the API,
and as a worker loads it) with its whole request."""

from __future__ import annotations

import httpx
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
    """count 1000 x ~10 KB: accepted (at the default 10 MB limit), and the request is stored
    once: the batch's keys hold less than three copies more than the same batch with a
    one-input request; a run read through the API and loaded as a worker loads it has the
    whole request; the runs' own hashes hold none of it."""
    server, db = own_redis
    keys = Keys("gfr")
    DeviceRegistry(db, keys).register(
        DeviceInfo(id="r-1", platform=Platform.IOS), "w@r-1", lease_s=3600
    )
    settings = Settings(redis_url=server.url, key_prefix="gfr", api_tokens=[TOKEN])
    app: FastAPI = create(settings, enqueuer=RecordingEnqueuer.of(settings))  # type: ignore[assignment]
    client = TestClient(app)

    def stored() -> int:
        """The bytes of every key under the prefix (MEMORY USAGE, all samples): what the
        fleet keeps, without the allocator's noise."""
        return sum(int(db.memory_usage(k, samples=0) or 0) for k in db.scan_iter("gfr:*"))

    def grows(inputs: dict[str, str]) -> tuple[int, httpx.Response]:
        """How many bytes a batch of 1,000 runs with `inputs` adds, and the answer."""
        before = stored()
        body = {"goal": "Sign in", "inputs": inputs, "count": 1000}
        resp = client.post("/v1/batches", json=body, headers=AUTH)
        assert resp.status_code == 201, resp.text[:300]
        return stored() - before, resp

    request = BatchSubmit.model_validate({"goal": "Sign in", "inputs": INPUTS}).goal_request()
    copy = len(request.model_dump_json())
    small, _ = grows({"field0": "0"})  # the runs themselves: hashes, index entries, the batch
    growth, resp = grows(INPUTS)
    print(f"batch of 1000 x {copy} B request: {growth / 1e6:.2f} MB stored, "  # noqa: T201 - the figure
          f"{(growth - small) / 1e3:.1f} KB more than with a 1-input request")  # fmt: skip
    assert growth - small < 3 * copy, (growth, small)  # the request stored once, not per run

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
