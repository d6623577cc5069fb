"""`FastSubmit` in front of a declared FastAPI route: an ordinary request goes to the submit
with the model FastAPI would have built; every other request reaches the declared route with
its body intact, and is answered by it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.datastructures import Headers
from starlette.responses import Response

from scheduler.api.fast_submit import FastSubmit
from scheduler.service.requests import RunSubmit

OK = {"goal": "Sign in", "inputs": {"email": "ada@example.com"}, "device": "d1"}


class Harness:
    def __init__(self) -> None:
        self.fast: list[tuple[RunSubmit, str | None]] = []
        self.declared: list[tuple[bytes, str | None]] = []
        app = FastAPI()

        @app.post("/v1/runs", status_code=201)
        async def submit_run(request: Request, sub: RunSubmit) -> Response:
            self.declared.append((await request.body(), request.headers.get("x-mark")))
            return JSONResponse({"by": "declared", "goal": sub.goal}, status_code=201)

        async def fast(sub: RunSubmit, headers: Headers) -> Response:
            self.fast.append((sub, headers.get("x-mark")))
            return JSONResponse({"by": "fast", "goal": sub.goal}, status_code=201)

        declared = next(r for r in app.router.routes if isinstance(r, APIRoute))
        app.router.routes.insert(0, FastSubmit(declared, fast).route())
        self.client = TestClient(app)

    def post(self, body: bytes, content_type: str | None = "application/json") -> Any:
        headers = {"x-mark": "m1"}
        if content_type is not None:
            headers["content-type"] = content_type
        return self.client.post("/v1/runs", content=body, headers=headers)


@pytest.fixture
def h() -> Harness:
    return Harness()


@pytest.mark.parametrize(
    "ctype", ["application/json", "application/json; charset=utf-8", "application/x-y+json"]
)
def test_an_ordinary_submit_takes_the_quick_route(h: Harness, ctype: str) -> None:
    r = h.post(json.dumps(OK).encode(), ctype)
    assert r.status_code == 201
    assert r.json() == {"by": "fast", "goal": "Sign in"}
    assert h.declared == []
    [(sub, mark)] = h.fast
    assert sub == RunSubmit.model_validate(OK)
    assert mark == "m1"


@pytest.mark.parametrize(
    ("body", "ctype", "status"),
    [
        (b'{"goal": ', "application/json", 422),  # not JSON: FastAPI's json_invalid
        (b'{"goal": "x", "nope": 1}', "application/json", 422),  # the model refuses it
        (b"[1, 2]", "application/json", 422),
        (b"\xff\xfe", "application/json", 422),  # not UTF-8
        (json.dumps(OK).encode(), "text/plain", 422),  # FastAPI parses only JSON types
        (json.dumps(OK).encode(), None, 422),  # no content type: not JSON to this FastAPI
    ],
)
def test_anything_else_is_answered_by_the_declared_route_with_its_body(
    h: Harness, body: bytes, ctype: str | None, status: int
) -> None:
    r = h.post(body, ctype)
    assert r.status_code == status, r.text
    assert h.fast == []


def test_the_declared_route_reads_the_body_the_quick_route_read(h: Harness) -> None:
    """A body the model refuses: the declared route's error names what is in it (the body
    was replayed, not lost)."""
    r = h.post(b'{"goal": "x", "nope": 1}')
    assert r.status_code == 422
    assert [e["loc"] for e in r.json()["detail"]] == [["body", "nope"]]


def test_a_wrong_method_is_the_declared_routes_405(h: Harness) -> None:
    r = h.client.get("/v1/runs")
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
