"""`/health`: without a token, up or down and nothing else; with a token, the detail (Redis,
pending runs, devices) and `degraded` when Redis lost its data since the API started (its
start marker is gone) or a worker that beats is missing from the registry."""

from __future__ import annotations

import time

import httpx
import pytest
import redis
from conftest import TOKEN, Served, create

from scheduler.api.health import CeleryBeats
from scheduler.local.fleet import LocalFleet
from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.celery_app import make_celery
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.settings import Settings

pytestmark = pytest.mark.fleet

AUTH = {"Authorization": f"Bearer {TOKEN}"}


class FixedBeats:
    """The fake beside `Beats`: these devices' workers answer."""

    def __init__(self, devices: set[str]) -> None:
        self.beating = devices

    def devices(self) -> set[str]:
        return set(self.beating)


def _register(db: redis.Redis, prefix: str, device: str) -> None:
    DeviceRegistry(db, Keys(prefix)).register(
        DeviceInfo(id=device, platform=Platform.IOS), "w@" + device, lease_s=3600
    )


def test_health_without_a_token_says_only_up_or_down(
    own_redis: tuple[LocalRedis, redis.Redis], serve: type[Served]
) -> None:
    """No token, or a wrong one: exactly `{"status": "ok"}`; the token adds the detail; Redis
    stopped: 503 `{"status": "unavailable"}`."""
    server, db = own_redis
    _register(db, "hl", "h-1")
    settings = Settings(redis_url=server.url, key_prefix="hl", api_tokens=[TOKEN])
    beats = FixedBeats({"h-1"})
    srv = serve(create(settings, enqueuer=RecordingEnqueuer.of(settings), beats=beats))
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        resp = httpx.get(srv.url + "/health", headers=headers, timeout=10)
        assert resp.status_code == 200
        assert resp.json() == {"status": "ok"}
    detail = httpx.get(srv.url + "/health", headers=AUTH, timeout=10).json()
    assert detail == {
        "status": "ok",
        "redis": "ok",
        "pending": 0,
        "devices": 1,
        "problems": [],
        "history": None,  # no GOALFLEET_DATABASE_URL: the fleet keeps none
    }
    server.stop()
    for headers in ({}, AUTH):
        resp = httpx.get(srv.url + "/health", headers=headers, timeout=15)
        assert resp.status_code == 503
        assert resp.json()["status"] == "unavailable"
    assert set(httpx.get(srv.url + "/health", timeout=15).json()) == {"status"}


def test_degraded_when_redis_lost_its_data(
    own_redis: tuple[LocalRedis, redis.Redis], serve: type[Served]
) -> None:
    """FLUSHALL after the API started: the detail says degraded (data lost since start), the
    public answer still only `ok`; it stays degraded after the devices come back."""
    server, db = own_redis
    _register(db, "hd", "h-1")
    settings = Settings(redis_url=server.url, key_prefix="hd", api_tokens=[TOKEN])
    srv = serve(
        create(settings, enqueuer=RecordingEnqueuer.of(settings), beats=FixedBeats({"h-1"}))
    )
    assert httpx.get(srv.url + "/health", headers=AUTH, timeout=10).json()["status"] == "ok"
    db.flushall()
    _register(db, "hd", "h-1")  # the worker re-registered
    detail = httpx.get(srv.url + "/health", headers=AUTH, timeout=10).json()
    assert detail["status"] == "degraded", detail
    assert any("lost its data" in p for p in detail["problems"]), detail
    assert httpx.get(srv.url + "/health", timeout=10).json() == {"status": "ok"}
    assert httpx.get(srv.url + "/health", headers=AUTH, timeout=10).json()["status"] == "degraded"


def test_degraded_when_a_beating_worker_is_not_registered(
    own_redis: tuple[LocalRedis, redis.Redis], serve: type[Served]
) -> None:
    """A worker answers the ping but its device is not in the registry: degraded, naming it."""
    server, db = own_redis
    _register(db, "hb", "h-1")
    settings = Settings(redis_url=server.url, key_prefix="hb", api_tokens=[TOKEN])
    srv = serve(
        create(settings, enqueuer=RecordingEnqueuer.of(settings), beats=FixedBeats({"h-1", "h-2"}))
    )
    detail = httpx.get(srv.url + "/health", headers=AUTH, timeout=10).json()
    assert detail["status"] == "degraded", detail
    assert any("h-2" in p and "not registered" in p for p in detail["problems"]), detail
    assert not any("h-1" in p for p in detail["problems"]), detail


def test_celery_beats_sees_the_live_workers(fleet: LocalFleet, settings: Settings) -> None:
    """The real seam: a Celery ping answered by the fleet's four worker processes names their
    devices; the fleet's /health detail counts them and names none of them as a problem."""
    beats = CeleryBeats(make_celery(settings))
    want = {"ios-1", "ios-2", "android-1", "slow-1"}
    deadline = time.monotonic() + 30
    seen = beats.devices()  # a new app's first ping gets no answers: ask again
    while not want <= seen and time.monotonic() < deadline:
        seen = beats.devices()
    assert want <= seen, seen
    detail = httpx.get(fleet.api_url + "/health", headers=AUTH, timeout=10).json()
    assert detail["devices"] >= len(want), detail
    assert not any(d in p for p in detail["problems"] for d in want), detail
