"""`GET /v1/runs/{id}/steps/{n}/screenshot` serves a step's stored picture (PNG) behind the
same bearer token as every route, and says why a step has none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TOKEN, create
from fastapi import FastAPI
from fastapi.testclient import TestClient

from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.model import Outcome, Platform, StepRow
from workers.core.records import DeviceInfo
from workers.fleet.artifacts import FileArtifacts
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.runs import ClaimKind, RunStore
from workers.settings import Settings

pytestmark = pytest.mark.fleet

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PNG = b"\x89PNG\r\n\x1a\n-a-picture"


@pytest.fixture
def api(redis_server: LocalRedis, tmp_path: Path) -> Iterator[tuple[TestClient, RunStore, str]]:
    db = redis_client(redis_server.url)
    keys = Keys("gfs")
    settings = Settings(
        redis_url=redis_server.url, key_prefix="gfs", api_tokens=[TOKEN], artifact_dir=tmp_path
    )
    DeviceRegistry(db, keys).register(
        DeviceInfo(id="sx-1", platform=Platform.IOS), "w@sx-1", lease_s=3600
    )
    app: FastAPI = create(settings, enqueuer=RecordingEnqueuer.of(settings))  # type: ignore[assignment]
    try:
        yield TestClient(app), RunStore(db, keys), FileArtifacts(tmp_path).put(PNG)
    finally:
        for key in db.scan_iter(match="gfs:*"):
            db.delete(key)
        db.close()


def test_a_step_picture_is_served_with_the_token_and_only_with_it(api):
    client, runs, artifact = api
    run = client.post("/v1/runs", json={"goal": "Sign in", "device": "sx-1"}, headers=AUTH)
    run_id = run.json()["id"]
    claim = runs.claim(run_id, "sx-1", "w@sx-1", cap=3)
    assert claim.kind is ClaimKind.CLAIMED
    base = {"screen": "s", "refs_generation": "1", "candidates": 0, "outcome": Outcome.ACTED}
    runs.write_step(run_id, claim.token, StepRow(index=1, screenshot=artifact, **base))
    note = "this device takes no screenshots"
    runs.write_step(run_id, claim.token, StepRow(index=2, screenshot_note=note, **base))

    url = f"/v1/runs/{run_id}/steps/1/screenshot"
    assert client.get(url).status_code == 401
    assert client.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = client.get(url, headers=AUTH)
    assert ok.status_code == 200, ok.text
    assert ok.headers["content-type"] == "image/png"
    assert ok.content == PNG

    none = client.get(f"/v1/runs/{run_id}/steps/2/screenshot", headers=AUTH)
    assert none.status_code == 404
    assert note in none.text
    assert client.get(f"/v1/runs/{run_id}/steps/3/screenshot", headers=AUTH).status_code == 404
    assert client.get(f"/v1/runs/{run_id}/steps/0/screenshot", headers=AUTH).status_code == 422
