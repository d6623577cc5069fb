"""API metrics over a real Redis: request counts by route template, and the fleet's state
(device up / busy / quarantined, queue depth, pending) read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from scheduler.api.app import create_app
from scheduler.api.observability import FleetCollector, new_registry
from scheduler.local.redis import LocalRedis, free_port
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.settings import Settings

TOKEN = "obs-token"


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with LocalRedis() as server:
        yield server.url


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def by_device(found: dict[str, list[tuple[dict[str, str], float]]], name: str) -> dict[str, float]:
    return {labels["device"]: v for labels, v in found.get(name, [])}


def test_request_metrics_and_fleet_gauges(redis_url: str) -> None:
    """Routes are templates (no run id in any label); device gauges follow Redis."""
    settings = Settings(redis_url=redis_url, key_prefix="obs", api_tokens=[SecretStr(TOKEN)])
    client = redis_client(redis_url)
    keys = Keys("obs")
    devices = DeviceRegistry(client, keys)
    devices.register(DeviceInfo(id="ios-1", platform=Platform.IOS), "w@ios-1", lease_s=30)
    devices.register(DeviceInfo(id="and-1", platform=Platform.ANDROID), "w@and-1", lease_s=30)
    devices.register(DeviceInfo(id="and-2", platform=Platform.ANDROID), "w@and-2", lease_s=30)
    client.hset(keys.device("and-1"), "quarantined", "1")
    client.delete(keys.lease("and-2"))  # its worker died without deregistering
    client.rpush(Keys("obs").queue("ios-1"), "m1", "m2")

    registry = new_registry()
    app = create_app(
        settings, client=client, enqueuer=RecordingEnqueuer(client, Keys("obs")), registry=registry
    )
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(app) as http:
        assert http.get("/health").status_code == 200
        for run_id in ("nope-1", "nope-2"):
            assert http.get(f"/v1/runs/{run_id}", headers=auth).status_code == 404
        assert http.post("/v1/runs", headers=auth, json={"goal": ""}).status_code == 422
        assert http.get("/v1/devices").status_code == 401
        resp = http.get("/health", headers={"X-Request-ID": "req-abc"})
        assert resp.headers["x-request-id"] == "req-abc"
        assert http.get("/no/such/route", headers=auth).status_code == 404
        text = http.get("/metrics", headers=auth).text

    found = samples(text)
    requests = {
        (ls["method"], ls["route"], ls["code"]): v
        for ls, v in found["goalfleet_api_requests_total"]
    }
    assert requests[("GET", "/v1/runs/{run_id}", "404")] == 2
    assert requests[("POST", "/v1/runs", "422")] == 1
    assert requests[("GET", "/v1/devices", "401")] == 1
    assert requests[("GET", "/health", "200")] == 2
    assert requests[("GET", "<unmatched>", "404")] == 1
    assert "nope-1" not in text
    assert found["goalfleet_api_request_duration_seconds_count"]

    assert by_device(found, "goalfleet_device_up") == {"ios-1": 1, "and-1": 1, "and-2": 0}
    assert by_device(found, "goalfleet_device_quarantined") == {"ios-1": 0, "and-1": 1, "and-2": 0}
    assert by_device(found, "goalfleet_device_busy") == {"ios-1": 0, "and-1": 0, "and-2": 0}
    assert by_device(found, "goalfleet_device_queue_depth")["ios-1"] == 2
    assert found["goalfleet_runs_pending"] == [({}, 0.0)]
    assert found["goalfleet_store_up"] == [({}, 1.0)]
    assert "process_cpu_seconds_total" in found
    client.close()


def test_store_down_is_a_gauge_not_a_failed_scrape() -> None:
    """With Redis unreachable the collector reports goalfleet_store_up 0 and nothing else."""
    dead = redis_client(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.2)
    collector = FleetCollector(FleetStore(dead, Keys("obs"), retention_s=60))
    families = list(collector.collect())
    assert [(f.name, f.samples[0].value) for f in families] == [("goalfleet_store_up", 0)]
    dead.close()
