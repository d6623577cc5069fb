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
from workers.core.model import Outcome, Platform, RunResult, RunStatus, StepRow
from workers.core.records import DeviceInfo
from workers.fleet.artifacts import FileArtifacts
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.runs import ClaimKind, RunStore
from workers.fleet.state.states import Failure
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


WEBM = b"\x1a\x45\xdf\xa3-a-video"


def _finished(client: TestClient, runs: RunStore, result: RunResult) -> str:
    run_id = client.post("/v1/runs", json={"goal": "Sign in", "device": "sx-1"}, headers=AUTH)
    run_id = run_id.json()["id"]
    claim = runs.claim(run_id, "sx-1", "w@sx-1", cap=3)
    record = runs.load(run_id)
    assert record is not None
    runs.finish(
        record, claim.token, result, failure=Failure.NONE, quarantine_after=3, retention_s=3600
    )
    return run_id


def test_a_runs_video_is_served_as_webm_and_a_missing_one_says_why(api, tmp_path: Path):
    client, runs, _ = api
    video = FileArtifacts(tmp_path).put(WEBM, kind="webm")
    assert (tmp_path / video[:2] / f"{video}.webm").is_file()
    filmed = _finished(client, runs, RunResult(status=RunStatus.DONE, goal="g", video=video))
    url = f"/v1/runs/{filmed}/video"
    assert client.get(url).status_code == 401
    ok = client.get(url, headers=AUTH)
    assert ok.status_code == 200, ok.text
    assert ok.headers["content-type"] == "video/webm"
    assert ok.content == WEBM

    note = "this device records no video"
    still = _finished(client, runs, RunResult(status=RunStatus.DONE, goal="g", video_note=note))
    none = client.get(f"/v1/runs/{still}/video", headers=AUTH)
    assert none.status_code == 404
    assert note in none.text
    (tmp_path / video[:2] / f"{video}.webm").unlink()  # pruned with its run
    assert "no longer kept" in client.get(url, headers=AUTH).text
