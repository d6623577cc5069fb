"""Bounded input at the API's edge (in-process ASGI, real Redis): every limit accepts a request
at the limit and refuses one past it with a 4xx naming the field and the fix, writing
nothing; authentication comes before the body (`{bad` without a token is a 401); a body over
the cap is a 413 whether declared or streamed; 100k inputs are refused at submit."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from conftest import TOKEN
from fastapi.testclient import TestClient
from pydantic import SecretStr

from scheduler.api.app import create_app
from scheduler.local.redis import LocalRedis
from scheduler.service.requests import BatchSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.settings import Settings

AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEVICE = "bound-1"
D = Settings()
"""The default limits, which these tests check at and past."""
LABELS = {f"l{i}": "v" * D.api_max_label_chars for i in range(D.api_max_labels + 1)}
"""One label past the count limit, each value at the length limit."""
LONG_NAME = "l" + "0" * 39
"""A label name at its limit (40 characters)."""

Client = Callable[..., TestClient]


@pytest.fixture(scope="module")
def bounds_db(sec_redis: LocalRedis) -> Iterator[redis.Redis]:
    db = redis_client(sec_redis.url)
    DeviceRegistry(db, Keys("gfb")).register(
        DeviceInfo(id=DEVICE, platform=Platform.IOS, labels={**LABELS, LONG_NAME: "v"}),
        "w@" + DEVICE,
        lease_s=3600,
    )
    yield db
    db.close()


@pytest.fixture
def client(sec_redis: LocalRedis, bounds_db: redis.Redis) -> Iterator[Client]:
    """`client(**settings)`: a TestClient on an app with those settings over (key prefix
    gfb); the pending runs it leaves are cleared after the test."""

    def make(**over: object) -> TestClient:
        settings = Settings.model_validate(
            {
                "redis_url": sec_redis.url,
                "key_prefix": "gfb",
                "api_tokens": [SecretStr(TOKEN)],
                "retention_s": 3600,
                **over,
            }
        )
        return TestClient(create_app(settings, enqueuer=RecordingEnqueuer.of(settings)))

    yield make
    bounds_db.delete("gfb:pending")


def _footprint(db: redis.Redis) -> tuple[int, int]:
    """Keys and pending runs, but for the wrong tokens' counts: the one thing a refused
    request writes (`scheduler.api.throttle`, expiring with their window)."""
    keys = db.scan_iter(match="gfb:*", count=1000)
    stored = sum(1 for k in keys if not str(k).startswith("gfb:authfail"))
    return stored, int(db.zcard("gfb:pending"))


def _refused(c: TestClient, db: redis.Redis, path: str, body: Any, status: int, field: str) -> None:
    before = _footprint(db)
    resp = c.post(path, json=body, headers=AUTH)
    assert resp.status_code == status, resp.text[:500]
    err = resp.json()
    assert err["fix"], err
    if status == 422:
        assert any(p["field"] == field and p["fix"] for p in err["problems"]), err["problems"]
    assert _footprint(db) == before


def _inputs(n: int) -> dict[str, str]:
    return {f"in{i}": "v" for i in range(n)}


RUN = {"goal": "Sign in", "device": DEVICE}
AT_AND_PAST: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("goal", {"goal": "g" * 500}, {"goal": "g" * 501}, "goal"),
    (
        "inputs count",
        {"inputs": _inputs(D.api_max_inputs)},
        {"inputs": _inputs(D.api_max_inputs + 1)},
        "inputs",
    ),
    (
        "inputs and secrets together",
        {"inputs": _inputs(D.api_max_inputs - 1), "secrets": {"pw": {"ref": "env:PW"}}},
        {"inputs": _inputs(D.api_max_inputs), "secrets": {"pw": {"ref": "env:PW"}}},
        "inputs",
    ),
    ("input name", {"inputs": {"a" * 40: "v"}}, {"inputs": {"a" * 41: "v"}}, "inputs"),
    (
        "input value",
        {"inputs": {"email": "v" * D.api_max_input_chars}},
        {"inputs": {"email": "v" * (D.api_max_input_chars + 1)}},
        "inputs.email",
    ),
    (
        "labels count",
        {"device": None, "selector": {"labels": dict(list(LABELS.items())[: D.api_max_labels])}},
        {"device": None, "selector": {"labels": LABELS}},
        "selector.labels",
    ),
    (
        "label value",
        {"device": None, "selector": {"labels": {"l0": "v" * D.api_max_label_chars}}},
        {"device": None, "selector": {"labels": {"l0": "v" * (D.api_max_label_chars + 1)}}},
        "selector.labels.l0",
    ),
    (
        "label name",
        {"device": None, "selector": {"labels": {LONG_NAME: "v"}}},
        {"device": None, "selector": {"labels": {LONG_NAME + "0": "v"}}},
        "selector.labels",
    ),
]


def _run(over: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in {**RUN, **over}.items() if v is not None}


@pytest.mark.parametrize(
    ("name", "at", "past", "field"), AT_AND_PAST, ids=[c[0] for c in AT_AND_PAST]
)
def test_each_limit_at_and_past(
    client: Client,
    bounds_db: redis.Redis,
    name: str,
    at: dict[str, Any],
    past: dict[str, Any],
    field: str,
) -> None:
    """At the limit: 201. One past it: 422 naming the field (or a field inside it) and the
    fix; nothing written."""
    c = client()
    ok = c.post("/v1/runs", json=_run(at), headers=AUTH)
    assert ok.status_code == 201, (name, ok.text[:500])
    before = _footprint(bounds_db)
    resp = c.post("/v1/runs", json=_run(past), headers=AUTH)
    assert resp.status_code == 422, (name, resp.text[:500])
    problems = resp.json()["problems"]
    assert any(p["field"].startswith(field) and p["fix"] for p in problems), (name, problems)
    assert _footprint(bounds_db) == before


def test_batch_count_times_request_size(client: Client, bounds_db: redis.Redis) -> None:
    """A batch asks for `count` x its request's bytes: at `api_max_batch_bytes` it is
    accepted, one run more is a 422 on `count` naming the limit."""
    body = {"goal": "Sign in", "inputs": {"email": "e" * 900}, "selector": {"platform": "ios"}}
    size = len(BatchSubmit.model_validate(body).goal_request().model_dump_json().encode())
    c = client(api_max_batch_bytes=7 * size)
    assert c.post("/v1/batches", json={**body, "count": 7}, headers=AUTH).status_code == 201
    _refused(c, bounds_db, "/v1/batches", {**body, "count": 8}, 422, "count")


def test_batch_count_limit(client: Client, bounds_db: redis.Redis) -> None:
    """`count` at its ceiling (1000) is accepted for a small request; 1001 is a 422."""
    c = client()
    body = {"goal": "Sign in", "selector": {"platform": "ios"}}
    assert c.post("/v1/batches", json={**body, "count": 1000}, headers=AUTH).status_code == 201
    _refused(c, bounds_db, "/v1/batches", {**body, "count": 1001}, 422, "count")


def _padded(size: int) -> bytes:
    """A valid run body of exactly `size` bytes (JSON padded with spaces)."""
    raw = json.dumps(RUN).encode()
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


def test_body_cap_at_and_past(client: Client, bounds_db: redis.Redis) -> None:
    """A body of exactly `api_max_body_bytes` is read; one byte more is a 413 naming the
    limit, nothing written; a streamed body (no Content-Length) past the cap is a 413 too."""
    c = client(api_max_body_bytes=4096)
    headers = {**AUTH, "Content-Type": "application/json"}
    assert c.post("/v1/runs", content=_padded(4096), headers=headers).status_code == 201
    before = _footprint(bounds_db)
    resp = c.post("/v1/runs", content=_padded(4097), headers=headers)
    assert resp.status_code == 413, resp.text
    assert resp.json()["error"] == "BODY_TOO_LARGE"
    assert "4096" in resp.json()["message"]
    assert resp.json()["fix"]

    def streamed() -> Iterator[bytes]:
        body = _padded(10_000)
        for i in range(0, len(body), 1000):
            yield body[i : i + 1000]

    resp = c.post("/v1/runs", content=streamed(), headers=headers)
    assert resp.status_code == 413, resp.text
    assert resp.json()["error"] == "BODY_TOO_LARGE"
    assert _footprint(bounds_db) == before


@pytest.mark.parametrize("body", [b"{bad", b"x" * 10_000, b'{"goal": "Sign in"}'])
def test_auth_comes_before_the_body(client: Client, bounds_db: redis.Redis, body: bytes) -> None:
    """Without a token every body, malformed or not, is a 401 (never a 400 or 422)."""
    c = client()
    before = _footprint(bounds_db)
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        resp = c.post(
            "/v1/runs", content=body, headers={**headers, "Content-Type": "application/json"}
        )
        assert resp.status_code == 401, resp.text
        assert resp.headers["www-authenticate"] == "Bearer"
        assert resp.json()["error"] == "UNAUTHORIZED"
    assert _footprint(bounds_db) == before


def test_100k_inputs_are_refused_at_submit(client: Client, bounds_db: redis.Redis) -> None:
    """100,000 inputs: over the default body cap, a 413; with the cap raised, a 422 on
    `inputs` naming the limit. Nothing written either way, and no device ever sees it."""
    body = {**RUN, "inputs": _inputs(100_000)}
    raw = json.dumps(body).encode()
    capped, raised = client(), client(api_max_body_bytes=8 * 1024 * 1024)
    before = _footprint(bounds_db)
    headers = {**AUTH, "Content-Type": "application/json"}
    t0 = time.perf_counter()
    assert capped.post("/v1/runs", content=raw, headers=headers).status_code == 413
    t1 = time.perf_counter()
    resp = raised.post("/v1/runs", content=raw, headers=headers)
    t2 = time.perf_counter()
    assert resp.status_code == 422, resp.text[:500]
    assert any(p["field"] == "inputs" for p in resp.json()["problems"])
    assert _footprint(bounds_db) == before
    print(f"100k inputs: 413 in {(t1 - t0) * 1000:.0f} ms, 422 in {(t2 - t1) * 1000:.0f} ms")  # noqa: T201 - the figure
