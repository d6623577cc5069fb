"""`/v1/history/...` at the API's edge (the app as `goalfleet api` builds it, a real Redis of the
module's own): without a history database every route is one 503 saying how to turn it on; a
bad window is a 422 naming the field; with an (embedded) database, the routes answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from scheduler.api.app import create_app
from scheduler.local.redis import LocalRedis
from workers.settings import Settings

TOKEN = "history-api-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROUTES = ("/v1/history", "/v1/history/pass-rates", "/v1/history/step-times", "/v1/history/outliers")


def _client(redis_server: LocalRedis, **over: object) -> TestClient:
    settings = Settings.model_validate(
        {"redis_url": redis_server.url, "key_prefix": "gfha", "api_tokens": [SecretStr(TOKEN)]}
        | over
    )
    return TestClient(create_app(settings), headers=AUTH)


@pytest.fixture
def with_db(redis_server: LocalRedis, tmp_path: Path) -> Iterator[TestClient]:
    with _client(redis_server, database_url=f"sqlite:///{tmp_path / 'h.db'}") as c:
        yield c


def test_without_a_database_each_route_says_how_to_turn_it_on(redis_server: LocalRedis) -> None:
    with _client(redis_server) as c:
        for route in ROUTES:
            r = c.get(route)
            assert r.status_code == 503, (route, r.text)
            assert "GOALFLEET_DATABASE_URL" in r.text, route


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"since": "0d"}, "since"),
        ({"since": "1000000w"}, "since"),
        ({"until": "not-a-date"}, "until"),
        ({"since": "1h", "until": "2001-01-01"}, "until"),
        ({"bucket": "6h"}, "bucket"),
    ],
)
def test_a_bad_window_is_a_422_naming_its_field(
    with_db: TestClient, query: dict[str, str], field: str
) -> None:
    r = with_db.get("/v1/history/step-times", params=query)
    assert r.status_code == 422, r.text
    assert field in r.text


def test_with_a_database_the_routes_answer(with_db: TestClient) -> None:
    for route in ROUTES:
        r = with_db.get(route, params={"since": "7d"})
        assert r.status_code == 200, (route, r.text)
    report = with_db.get("/v1/history").json()
    assert set(report) >= {"pass_rates", "step_times", "outliers", "since", "until"}


def test_health_says_where_the_fleet_records_its_history(
    redis_server: LocalRedis, tmp_path: Path
) -> None:
    """With a token, `/health` names the fleet's history database (its password hidden), or
    null when the fleet keeps none; without one it says nothing of it."""
    with _client(redis_server) as c:
        assert c.get("/health").json()["history"] is None
    url = f"sqlite:///{tmp_path / 'h.db'}"
    with _client(redis_server, database_url=url) as c:
        assert c.get("/health").json()["history"] == url
        assert "history" not in c.get("/health", headers={"Authorization": ""}).json()
