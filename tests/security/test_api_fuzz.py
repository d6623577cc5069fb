"""The HTTP API fuzzed from its own OpenAPI schema (schemathesis, valid and invalid data), its
request models fuzzed with hypothesis, and auth on every route.

Checked on every generated request: no 5xx; every 4xx is our JSON error naming the problem
(and, for 422, the field and the fix); a rejected request stores and enqueues nothing (key
count and every list's length unchanged)."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import pytest
import schemathesis
from conftest import DEVICE, TOKEN, Api
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from pydantic import BaseModel, ValidationError
from schemathesis.generation.modes import GenerationMode

from scheduler.service.requests import BatchSubmit, RunSubmit, ScheduleSubmit

AUTH = {"Authorization": f"Bearer {TOKEN}"}
OPEN_ROUTES = {"/health"}
"""The one API route without auth. FastAPI's own /openapi.json, /docs and /redoc are open too
(documented in docs/fleet.md); they serve the schema, no data."""


def check_error_body(status: int, body: Any) -> None:
    assert isinstance(body, dict), body
    assert body.get("error"), body
    assert body.get("message"), body
    if status == 422:
        assert body.get("problems"), body
        for p in body["problems"]:
            assert p["field"], body
            assert p["problem"], body
            assert p["fix"], body


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_fuzz_api_from_openapi(api: Api, mode: GenerationMode) -> None:
    """Every operation of the OpenAPI schema, with data that fits it and data that does not:
    never 5xx; 4xx bodies name the problem; nothing stored or queued for a rejected request.

    (schemathesis' own pytest plugin does not load under pytest 9, so its strategies are
    drawn here through hypothesis directly.)"""
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.app)
    strategy = schema.as_strategy(generation_mode=mode)
    seen: dict[str, int] = {}

    @given(case=strategy)
    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    def one(case: Any) -> None:
        before = api.footprint()
        headers = dict(case.headers or {})
        headers.update(AUTH)
        response = case.call(headers=headers)
        label = f"{case.method} {case.path} {response.status_code}"
        seen[label] = seen.get(label, 0) + 1
        assert response.status_code < 500, (case.method, case.path, response.text)
        if response.status_code >= 400:
            check_error_body(response.status_code, response.json())
            assert api.footprint() == before, (case.method, case.path, response.text)

    one()
    operations = {label.rsplit(" ", 1)[0] for label in seen}
    assert len(operations) >= 10, seen  # the fuzzing reached (nearly) every operation


def _routes(api: Api) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for route in api.app.routes:  # the documented API (not /docs, not the console's /ui pages:
        # tests/fleet/test_api_roles.py and tests/console hold what those answer)
        if isinstance(route, APIRoute) and route.include_in_schema:
            path = route.path.replace("{run_id}", "r1").replace("{batch_id}", "b1")
            path = path.replace("{schedule_id}", "s1")
            out.extend((m, path) for m in sorted(route.methods or ()))
    return out


def test_every_route_but_health_needs_the_token(api: Api) -> None:
    """No token, a wrong token, a wrong scheme, an empty bearer: 401 with WWW-Authenticate on
    every API route (enumerated from the app) except /health; nothing stored."""
    client = TestClient(api.app)
    routes = _routes(api)
    assert len(routes) >= 12
    bad_headers: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer "},
        {"Authorization": TOKEN},
    ]
    before = api.footprint()
    checked = 0
    for method, path in routes:
        for headers in bad_headers:
            r = client.request(method, path, headers=headers, json={"goal": "x"})
            if path in OPEN_ROUTES:
                assert r.status_code == 200, (method, path)
                continue
            assert r.status_code == 401, (method, path, headers, r.status_code, r.text)
            assert r.headers.get("www-authenticate") == "Bearer"
            assert r.json()["error"] == "UNAUTHORIZED"
            checked += 1
    assert api.footprint() == before
    assert checked >= 11 * len(bad_headers)


def test_the_run_submit_documents_its_guard_and_key_as_the_batch_submit(api: Api) -> None:
    """POST /v1/runs reads its bearer guard and `Idempotency-Key` itself (the hot path); its
    OpenAPI says what FastAPI derives for POST /v1/batches from the same two dependencies."""
    paths = api.app.openapi()["paths"]
    run, batch = paths["/v1/runs"]["post"], paths["/v1/batches"]["post"]
    assert run["security"] == batch["security"] == [{"HTTPBearer": []}]
    assert run["parameters"] == batch["parameters"]
    assert [p["name"] for p in run["parameters"]] == ["idempotency-key"]
    assert "description" not in run


def test_empty_token_list_refuses_everything(api: Api) -> None:
    """An API started with no tokens refuses every guarded route, even an empty bearer."""
    from scheduler.api.app import create_app  # noqa: PLC0415 - a second app for this test only

    closed = create_app(api.settings.model_copy(update={"api_tokens": []}))
    client = TestClient(closed)
    for method, path in _routes(api):
        if path in OPEN_ROUTES:
            continue
        for headers in ({}, {"Authorization": "Bearer "}, AUTH):
            assert client.request(method, path, headers=headers).status_code == 401, path


# -- the request models, fuzzed directly and through the API -----------------------------

_text = st.text(max_size=60) | st.sampled_from(["", " ", "Sign in", "x" * 5000, "\x00", "é"])
_scalar = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats() | _text
_json = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_fields = st.sampled_from(
    [
        "goal", "inputs", "secrets", "done_when", "max_steps", "min_confidence",
        "max_unproductive", "decider", "priority", "device", "selector", "count", "name",
        "every_s", "password", "extra",
    ]
)  # fmt: skip
_near = {
    "inputs": st.dictionaries(
        st.sampled_from(["email", "password", "otp", "Bad Name", "pin", "x" * 50]), _text
    ),
    "secrets": st.dictionaries(
        st.sampled_from(["password", "pin", "1x"]),
        _text
        | st.fixed_dictionaries({"ref": _text | st.sampled_from(["env:PW", "file:/etc/passwd"])}),
    ),
    "max_steps": st.integers(-5, 500),
    "priority": st.integers(-3, 12),
    "count": st.integers(-1, 2000),
    "device": _text | st.just(DEVICE) | st.just("nope-1"),
    "selector": _json | st.just({"platform": "ios"}) | st.just({"labels": {"pool": "zz"}}),
}
_bodies = st.dictionaries(_fields, _json, max_size=6) | st.fixed_dictionaries(
    {"goal": _text}, optional=_near
)


@given(body=_bodies)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_request_models_reject_with_validation_errors_only(body: dict[str, Any]) -> None:
    """Any JSON object: each request model either accepts it or raises a ValidationError whose
    every error has a location and a message (never a TypeError, KeyError, ...)."""
    for model in (RunSubmit, BatchSubmit, ScheduleSubmit):
        try:
            model.model_validate(body)
        except ValidationError as exc:
            for err in exc.errors():
                assert err["msg"]


@given(body=_bodies, route=st.sampled_from(["/v1/runs", "/v1/batches", "/v1/schedules"]))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_fuzzed_submits_never_5xx_and_reject_cleanly(
    api: Api, body: dict[str, Any], route: str
) -> None:
    """Fuzzed bodies through the API: no 5xx; a body the model refuses is a 422 naming each
    field; any 4xx stores and enqueues nothing."""
    client = TestClient(api.app)
    model: dict[str, type[BaseModel]] = {
        "/v1/runs": RunSubmit,
        "/v1/batches": BatchSubmit,
        "/v1/schedules": ScheduleSubmit,
    }
    try:
        model[route].model_validate(body)
        valid = True
    except ValidationError:
        valid = False
    before = api.footprint()
    r = client.post(route, content=json.dumps(body), headers=AUTH)
    assert r.status_code < 500, r.text
    if not valid:
        assert r.status_code == 422, r.text
    if r.status_code >= 400:
        check_error_body(r.status_code, r.json())
        assert api.footprint() == before, r.text


@pytest.mark.parametrize(
    "raw",
    [b"{", b"", b"[]", b"null", b'"goal"', b"\xff\xfe", b'{"goal": "x"' + b" " * 10, b"{}" * 3],
)
def test_malformed_bodies_are_400_or_422(api: Api, raw: bytes) -> None:
    """Malformed or non-object JSON: 400 MALFORMED_JSON or 422, never 5xx, nothing stored."""
    client = TestClient(api.app)
    before = api.footprint()
    r = client.post("/v1/runs", content=raw, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code in {400, 422}, (raw, r.status_code, r.text)
    check_error_body(r.status_code, r.json())
    assert api.footprint() == before


def test_plaintext_secret_is_refused_naming_the_fix(api: Api) -> None:
    """A plaintext secret, or a password-like plain input: 422 naming the field and how to pass
    a reference instead; nothing stored; the value is not echoed back."""
    client = TestClient(api.app)
    before = api.footprint()
    for body in (
        {"goal": "Sign in", "secrets": {"password": "hunter2-plain"}},
        {"goal": "Sign in", "inputs": {"password": "hunter2-plain"}},
    ):
        r = client.post("/v1/runs", json={**body, "device": DEVICE}, headers=AUTH)
        assert r.status_code == 422, r.text
        problem = r.json()["problems"][0]
        assert problem["field"] in {"secrets", "inputs"}
        assert "env:PASSWORD" in r.text
        assert "GOALFLEET_SECRET_PASSWORD" in r.text
        assert "hunter2-plain" not in r.text
    assert api.footprint() == before
