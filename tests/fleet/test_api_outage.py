"""A full Redis (maxmemory reached under `noeviction`) is an outage, not a crash: every
submit, cancel and read the API cannot serve is a 503 in the API's error shape with a
`Retry-After`, nothing is half-written, and once memory frees the same submits succeed.

Its own redis-server on a random port (never the shared one), the API over real HTTP
(uvicorn) with the real Celery enqueuer, and one registered device (a long lease, no worker)
so a valid submit can be placed."""

from __future__ import annotations

import httpx
import pytest
import redis
from conftest import TOKEN, Served, create

from scheduler.local.redis import LocalRedis
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.settings import Settings

pytestmark = pytest.mark.fleet

AUTH = {"Authorization": f"Bearer {TOKEN}"}
RUN = {"goal": "Sign in", "inputs": {"email": "ada@example.com"}, "device": "oom-1"}
BATCH = {"goal": "Sign in", "count": 3}
FILLER = "filler"


def _fill(db: redis.Redis) -> None:
    """Put 4 MB in one list, then set maxmemory 1 MB below what Redis uses: it is full
    (noeviction) with a margin its own buffers' comings and goings cannot undo, until the
    list is deleted."""
    chunk = "x" * 65536
    for _ in range(64):
        db.rpush(FILLER, chunk)
    used = int(db.info("memory")["used_memory"])
    db.config_set("maxmemory", used - 1024 * 1024)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        db.set("probe", "x")


def _ours(db: redis.Redis, keys: Keys) -> tuple[set[str], int]:
    """Every key of the fleet (names), and how many runs are pending."""
    return set(db.scan_iter(match=keys.pattern(), count=1000)), int(db.zcard(keys.pending))


def test_full_redis_is_a_503_with_retry_after_and_nothing_half_written(
    own_redis: tuple[LocalRedis, redis.Redis], serve: type[Served]
) -> None:
    """maxmemory + noeviction reached: run and batch submits and a cancel get 503 JSON with
    Retry-After (never a plain-text 500); no run key and no pending entry is added; /health
    with a token says degraded (Redis full), without one still ok; after the filler is
    deleted the same submits are 201 and the cancel takes effect."""
    own, db = own_redis
    keys = Keys("oom")
    settings = Settings(redis_url=own.url, key_prefix="oom", api_tokens=[TOKEN], retention_s=3600)
    DeviceRegistry(db, keys).register(
        DeviceInfo(id="oom-1", platform=Platform.IOS), "w@oom-1", lease_s=3600
    )
    srv = serve(create(settings))
    with httpx.Client(base_url=srv.url, headers=AUTH, timeout=15) as http:
        queued = http.post("/v1/runs", json={**RUN, "device": "oom-1"})
        assert queued.status_code == 201, queued.text
        run_id = queued.json()["id"]
        # a second run stays pending behind the first (the device is busy with it)
        pending = http.post("/v1/runs", json=RUN)
        assert pending.status_code == 201, pending.text
        _fill(db)
        before = _ours(db, keys)

        for method, path, body in (
            ("POST", "/v1/runs", RUN),
            ("POST", "/v1/batches", BATCH),
            ("POST", f"/v1/runs/{pending.json()['id']}/cancel", None),
        ):
            resp = http.request(method, path, json=body)
            assert resp.status_code == 503, (path, resp.status_code, resp.text)
            assert resp.headers["content-type"].startswith("application/json"), resp.text
            assert int(resp.headers["retry-after"]) > 0
            err = resp.json()
            assert err["error"] == "REDIS_UNAVAILABLE"
            assert "full" in err["message"], err
            assert "nothing was written" in err["message"], err
            assert err["fix"], err
        assert _ours(db, keys) == before  # no run key, no batch key, no pending entry
        assert http.get(f"/v1/runs/{run_id}").status_code == 200  # reads still work
        detail = http.get("/health").json()
        assert detail["status"] == "degraded", detail
        assert "full" in detail["redis"], detail
        assert httpx.get(srv.url + "/health", timeout=15).json() == {"status": "ok"}

        db.delete(FILLER)
        again = http.post("/v1/runs", json=RUN)
        assert again.status_code == 201, again.text
        batch = http.post("/v1/batches", json=BATCH)
        assert batch.status_code == 201, batch.text
        assert http.get("/health").json()["status"] == "ok"
        cancelled = http.post(f"/v1/runs/{pending.json()['id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"


def test_unreachable_redis_is_a_503_with_retry_after(
    own_redis: tuple[LocalRedis, redis.Redis], serve: type[Served]
) -> None:
    """Redis stopped: a submit and a read are 503 JSON with Retry-After."""
    own, db = own_redis
    settings = Settings(redis_url=own.url, key_prefix="gone", api_tokens=[TOKEN])
    DeviceRegistry(db, Keys("gone")).register(
        DeviceInfo(id="oom-1", platform=Platform.IOS), "w@oom-1", lease_s=3600
    )
    srv = serve(create(settings))
    own.stop()
    with httpx.Client(base_url=srv.url, headers=AUTH, timeout=15) as http:
        for method, path in (("POST", "/v1/runs"), ("GET", "/v1/devices")):
            resp = http.request(method, path, json=RUN if method == "POST" else None)
            assert resp.status_code == 503, resp.text
            assert int(resp.headers["retry-after"]) > 0
            assert resp.json()["error"] == "REDIS_UNAVAILABLE"
