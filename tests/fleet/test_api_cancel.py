"""A cancel's answer says whether it took effect: a queued run is `cancelled` at once
(`cancel_outcome: cancelled`); a running one only has the cancel recorded, and its worker
stops before its next step (`cancel_outcome: requested`, the run still `running`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import TOKEN, create
from fastapi import FastAPI
from fastapi.testclient import TestClient

from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.runs import ClaimKind, RunStore
from workers.settings import Settings

pytestmark = pytest.mark.fleet

AUTH = {"Authorization": f"Bearer {TOKEN}"}
RUN = {"goal": "Sign in"}


@pytest.fixture
def api(redis_server: LocalRedis) -> Iterator[tuple[TestClient, RunStore]]:
    db = redis_client(redis_server.url)
    keys = Keys("gfc")
    settings = Settings(redis_url=redis_server.url, key_prefix="gfc", api_tokens=[TOKEN])
    for device in ("cx-1", "cx-2"):
        DeviceRegistry(db, keys).register(
            DeviceInfo(id=device, platform=Platform.IOS), "w@" + device, lease_s=3600
        )
    app: FastAPI = create(settings, enqueuer=RecordingEnqueuer.of(settings))  # type: ignore[assignment]
    try:
        yield TestClient(app), RunStore(db, keys)
    finally:
        for key in db.scan_iter(match="gfc:*"):
            db.delete(key)
        db.close()


def test_cancel_says_whether_it_took_effect(api: tuple[TestClient, RunStore]) -> None:
    """Queued: `cancelled`, and the run is cancelled. Running (claimed by its worker):
    `requested`, the run still running with the cancel recorded. Ended: 409."""
    client, runs = api
    queued = client.post("/v1/runs", json={**RUN, "device": "cx-1"}, headers=AUTH).json()
    resp = client.post(f"/v1/runs/{queued['id']}/cancel", headers=AUTH)
    assert resp.status_code == 200, resp.text
    assert resp.json()["cancel_outcome"] == "cancelled"
    assert resp.json()["status"] == "cancelled"

    running = client.post("/v1/runs", json={**RUN, "device": "cx-2"}, headers=AUTH).json()
    assert running["device"] == "cx-2", running  # placed at submit: the device was idle
    claim = runs.claim(running["id"], "cx-2", "w@cx-2", cap=3)
    assert claim.kind is ClaimKind.CLAIMED
    resp = client.post(f"/v1/runs/{running['id']}/cancel", headers=AUTH)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["cancel_outcome"] == "requested"
    assert body["status"] == "running"
    assert body["cancel_requested"] is True

    again = client.post(f"/v1/runs/{queued['id']}/cancel", headers=AUTH)
    assert again.status_code == 409
