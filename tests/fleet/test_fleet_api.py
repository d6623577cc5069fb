"""The API's contract over real HTTP: every bad input is a 4xx naming the field and the fix
with nothing written to Redis; 401 without a token; idempotency; 503 with Redis down."""

from __future__ import annotations

import httpx
import pytest
import redis
from conftest import SECRET_VALUE, TOKEN, create
from redis_values import keys_holding

from scheduler.local.fleet import LocalFleet
from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.settings import Settings

pytestmark = pytest.mark.fleet

OK = {"goal": "Sign in", "inputs": {"email": "ada@example.com"}}

BAD_RUNS = [
    ("unknown device", {**OK, "device": "nope-9"}, 422, "device"),
    ("selector matching nothing", {**OK, "selector": {"platform": "linux"}}, 422, "selector"),
    ("labels matching nothing", {**OK, "selector": {"labels": {"pool": "zzz"}}}, 422, "selector"),
    ("empty goal", {**OK, "goal": ""}, 422, "goal"),
    ("blank goal", {**OK, "goal": "   "}, 422, "goal"),
    ("oversized goal", {**OK, "goal": "x" * 501}, 422, "goal"),
    ("no goal", {"inputs": {}}, 422, "goal"),
    ("max_steps 0", {**OK, "max_steps": 0}, 422, "max_steps"),
    ("max_steps 101", {**OK, "max_steps": 101}, 422, "max_steps"),
    ("max_steps text", {**OK, "max_steps": "many"}, 422, "max_steps"),
    ("plaintext secret", {**OK, "secrets": {"password": "hunter2"}}, 422, "secrets"),
    (
        "bad secret ref",
        {**OK, "secrets": {"password": {"ref": "vault:x"}}},
        422,
        "secrets.password.ref",
    ),
    ("sensitive plain input", {**OK, "inputs": {"password": "hunter2"}}, 422, "inputs"),
    ("bad input name", {**OK, "inputs": {"1st": "x"}}, 422, "inputs"),
    ("device and selector", {**OK, "device": "ios-1", "selector": {}}, 422, "body"),
    ("unknown field", {**OK, "colour": "red"}, 422, "colour"),
    ("priority 10", {**OK, "priority": 10}, 422, "priority"),
    ("bad platform", {**OK, "selector": {"platform": "windows"}}, 422, "selector.platform"),
    ("min_confidence 2", {**OK, "min_confidence": 2}, 422, "min_confidence"),
]


def _dbsize(settings: Settings) -> tuple[int, int, int]:
    """Our store's keys, pending runs, and messages in device queues. (Not all our keys:
    kombu's own transient keys such as `unacked_mutex` come and go on their own.)"""
    c = redis_client(settings.redis_url)
    keys = Keys(settings.key_prefix)
    try:
        ours = sum(1 for k in c.scan_iter(match=keys.pattern(), count=1000) if keys.is_store_key(k))
        queues = c.scan_iter(match=keys.queue("*"), _type="list")
        return ours, c.zcard(keys.pending), sum(c.llen(q) for q in queues)
    finally:
        c.close()


@pytest.mark.parametrize(
    ("name", "body", "status", "field"), BAD_RUNS, ids=[b[0] for b in BAD_RUNS]
)
def test_bad_run_is_4xx_naming_the_field_and_writes_nothing(
    http: httpx.Client, settings: Settings, name: str, body: dict, status: int, field: str
):
    """Each bad input: the status, a problem naming the field with a fix, no key written."""
    before = _dbsize(settings)
    resp = http.post("/v1/runs", json=body)
    assert resp.status_code == status, resp.text
    problems = resp.json()["problems"]
    assert any(p["field"] == field for p in problems), (name, problems)
    assert all(p["problem"] for p in problems)
    assert any(p["fix"] for p in problems if p["field"] == field), problems
    assert _dbsize(settings) == before


def test_malformed_json_is_400(http: httpx.Client, settings: Settings):
    """A body that is not JSON is a 400 saying so."""
    before = _dbsize(settings)
    resp = http.post(
        "/v1/runs", content=b'{"goal": "Sign in",', headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 400
    assert resp.json()["error"] == "MALFORMED_JSON"
    assert _dbsize(settings) == before


def test_bad_batch_and_query_and_header(http: httpx.Client, settings: Settings):
    """Batch selector matching nothing, count out of range, a bad `after`, a bad
    Idempotency-Key: all 4xx naming the field, nothing written."""
    before = _dbsize(settings)
    cases = [
        ("/v1/batches", {**OK, "selector": {"platform": "linux"}}, {}, "selector"),
        ("/v1/batches", {**OK, "count": 0}, {}, "count"),
        ("/v1/batches", {**OK, "count": 1001}, {}, "count"),
        ("/v1/runs", OK, {"Idempotency-Key": "has spaces!"}, "Idempotency-Key"),
    ]
    for path, body, headers, field in cases:
        resp = http.post(path, json=body, headers=headers)
        assert resp.status_code == 422, resp.text
        assert resp.json()["problems"][0]["field"] == field
    resp = http.get("/v1/runs/abc/steps", params={"after": -1})
    assert resp.status_code == 422
    assert resp.json()["problems"][0]["field"] == "after"
    assert http.get("/v1/runs/nope").status_code == 404
    assert http.post("/v1/runs/nope/cancel").status_code == 404
    assert http.get("/v1/batches/nope").status_code == 404
    assert _dbsize(settings) == before


def test_idempotency_over_http(http: httpx.Client, settings: Settings):
    """Same key and body: 201 then 200 with the same run; another body: 409, nothing written."""
    body = {**OK, "device": "ios-1"}
    a = http.post("/v1/runs", json=body, headers={"Idempotency-Key": "idem-1"})
    assert a.status_code == 201
    before = _dbsize(settings)
    b = http.post("/v1/runs", json=body, headers={"Idempotency-Key": "idem-1"})
    assert b.status_code == 200
    assert b.json()["id"] == a.json()["id"]
    c = http.post(
        "/v1/runs", json={**body, "goal": "Sign out"}, headers={"Idempotency-Key": "idem-1"}
    )
    assert c.status_code == 409
    assert _dbsize(settings)[0] <= before[0] + 3  # the first run may be writing steps meanwhile


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/runs"),
        ("POST", "/v1/batches"),
        ("GET", "/v1/runs/x"),
        ("GET", "/v1/runs/x/steps"),
        ("POST", "/v1/runs/x/cancel"),
        ("GET", "/v1/batches/x"),
        ("GET", "/v1/devices"),
        ("GET", "/v1/schedules"),
        ("GET", "/metrics"),
    ],
)
def test_401_without_or_with_a_wrong_token(fleet: LocalFleet, method: str, path: str):
    """Every route but /health needs a valid bearer token."""
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        resp = httpx.request(method, fleet.api_url + path, json=OK, headers=headers)
        assert resp.status_code == 401, (headers, resp.text)
        assert resp.headers["WWW-Authenticate"] == "Bearer"
    assert httpx.get(fleet.api_url + "/health").status_code == 200


def test_503_when_redis_is_down(serve):
    """With its Redis stopped the API answers 503 with a clear message; /health too."""
    with LocalRedis() as own:
        s = Settings(redis_url=own.url, key_prefix="down", api_tokens=[TOKEN])
        DeviceRegistry(redis_client(own.url), Keys("down")).register(
            DeviceInfo(id="d1", platform=Platform.IOS), "w@d1", lease_s=60
        )
        srv = serve(create(s, enqueuer=RecordingEnqueuer.of(s)))
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(srv.url + "/v1/runs", json=OK, headers=auth).status_code == 201
        own.stop()
        resp = httpx.post(srv.url + "/v1/runs", json=OK, headers=auth, timeout=15)
        assert resp.status_code == 503
        assert "Redis" in resp.json()["message"]
        assert "nothing was written" in resp.json()["message"]
        assert httpx.get(srv.url + "/health", timeout=15).status_code == 503
        assert httpx.get(srv.url + "/v1/devices", headers=auth, timeout=15).status_code == 503


def test_no_secret_value_in_redis(api, db: redis.Redis):
    """After runs with a secret input, no Redis key or value holds the secret's value."""
    body = {**OK, "device": "android-1", "secrets": {"password": {"ref": "env:FLEET_PW"}}}
    final = api.wait(api.submit_run(body).id, timeout_s=60)
    assert final.status.value == "done"
    assert keys_holding(db, SECRET_VALUE) == []
