"""Building the API asks nothing of Redis: an app built while Redis is down is built (its
routes answer 503 until Redis is back), so `goalfleet api` can say "Redis is down" in one line
rather than fail inside its start-up."""

from __future__ import annotations

from fastapi.testclient import TestClient

from scheduler.api.app import create_app
from workers.settings import Settings


def test_the_app_builds_with_redis_down() -> None:
    """`create_app` with Redis unreachable returns an app (no collector queries Redis when it
    is registered), and its /health says the store is down."""
    settings = Settings(redis_url="redis://127.0.0.1:1/0", api_tokens=["t"])
    app = create_app(settings)
    with TestClient(app) as http:
        resp = http.get("/health")
    assert resp.status_code == 503, resp.text
