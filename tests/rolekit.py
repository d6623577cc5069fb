"""The roles' world: named tokens with roles, the API (with the console) in process on a real
Redis, and a maker of what `alice` (a `submit` token) owns, freshly made for each check: a run
parked for a person with a step picture (its typed input shown), a batch, a schedule, a memory
entry. Shared by the route x role table (tests/fleet/test_api_roles.py) and the hostile-input
probe (tests/security/test_hostile_input.py)."""

from __future__ import annotations

import contextlib
import itertools
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import Route
from storekit import park

from scheduler.api.app import create_app
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.memory import Remembered
from workers.core.model import (
    Action,
    ActionKind,
    Outcome,
    Platform,
    StepRow,
)
from workers.core.records import DeviceInfo
from workers.fleet.artifacts import artifact_id, artifacts
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.memory_store import RedisMemory
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.questions import QuestionStore
from workers.fleet.state.runs import RunStore
from workers.settings import Settings

TOKENS = {
    "reader": "t-reader-1",
    "alice": "t-alice-22",
    "bob": "t-bob-333",
    "answerer": "t-answer-4",
    "ops": "t-ops-55555",
    "erin": "t-erin-666666",
}
ROLES = "reader:read,alice:submit,bob:submit,answerer:answer,ops:admin,erin:read+submit"
EMAIL = "alice@example.com"
PNG = b"\x89PNG\r\n\x1a\n" + b"picture"
CONSOLE_COOKIE = "goalfleet_console"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def auth(who: str) -> dict[str, str]:
    return {} if who == "none" else {"Authorization": f"Bearer {TOKENS[who]}"}


@dataclass
class Owned:
    """What alice owns for one cell."""

    run: str
    batch: str
    schedule: str
    memory: str
    device: str
    picture: str
    """The artifact id of the run's step picture."""


class World:
    """The app on a real Redis, and a maker of alice's things."""

    def __init__(self, client: TestClient, settings: Settings, db: Any) -> None:
        self.client = client
        self.settings = settings
        self.db = db
        self.keys = Keys(settings.key_prefix)
        self.runs = RunStore(db, self.keys)
        self.questions = QuestionStore(db, self.keys, retention_s=3600, memory_ttl_s=3600)
        self.registry = DeviceRegistry(db, self.keys)
        self.n = itertools.count()

    def device(self) -> str:
        did = f"rd-{next(self.n)}"
        info = DeviceInfo(id=did, platform=Platform.IOS, os_version="17.5")
        self.registry.register(info, lease_holder(worker_name(did)), lease_s=3600)
        return did

    def post(self, who: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.client.post(path, json=body, headers=auth(who))
        assert resp.status_code == 201, resp.text
        return resp.json()  # type: ignore[no-any-return]

    def parked(self, who: str = "alice", *, inputs: dict[str, str] | None = None) -> str:
        """A run of `who`'s, on a device of its own: claimed, one step with a picture (its
        typed input shown), parked for a person."""
        did = self.device()
        body = {"goal": "Sign in", "device": did, "inputs": inputs or {"email": EMAIL}}
        run_id = str(self.post(who, "/v1/runs", body)["id"])
        claim = self.runs.claim(run_id, did, worker_name(did), cap=3)
        picture = artifacts(self.settings).put(self.picture(run_id))
        typed = Action(kind=ActionKind.FILL, ref="e2", pinned="@e2~s1", input="email",
                       shown_value=next(iter((inputs or {"email": EMAIL}).values())))  # fmt: skip
        row = StepRow(
            index=1,
            screen="Sign in",
            refs_generation="s1",
            candidates=2,
            action=typed,
            outcome=Outcome.ACTED,
            screenshot=picture,
        )
        self.runs.write_step(run_id, claim.token, row)
        record = self.runs.load(run_id)
        assert record is not None
        park(self.questions, record, claim.token)
        return run_id

    @staticmethod
    def picture(run_id: str) -> bytes:
        """The picture of a parked run's step (each run's own: pictures are stored by their
        content)."""
        return PNG + run_id.encode()

    def busy(self, who: str) -> str:
        """A run of `who`'s, reserved for a device of its own (the device is busy with it)."""
        did = self.device()
        run = self.post(who, "/v1/runs", {"goal": "Sign in", "device": did})
        assert run["device"] == did, run
        return str(run["id"])

    def owned(self) -> Owned:
        run = self.parked()
        batch = self.post("alice", "/v1/batches", {"goal": "Sign in", "count": 1})["id"]
        sched = self.post(
            "alice", "/v1/schedules", {"name": "nightly", "every_s": 3600, "goal": "Sign in"}
        )["id"]
        key = uuid.uuid4().hex
        RedisMemory(self.db, self.keys, decider="rules", ttl_s=3600).overwrite(
            Remembered(key=key, done=True, source="human", origin="ops", goal="sign in")
        )
        return Owned(run, batch, sched, key, self.device(), artifact_id(self.picture(run)))

    def call(self, route: str, who: str, o: Owned, session: Signed | None = None) -> int:
        """The status `route` answers `who` about `o`: with its bearer token, or in its
        console `session` (forms carry the session's CSRF token)."""
        method, template = route.split(" ")
        name = "swagger-ui.css" if template.startswith("/docs-assets/") else "console.js"
        path = template.format(
            run_id=o.run,
            batch_id=o.batch,
            schedule_id=o.schedule,
            key=o.memory,
            index=1,
            name=name,
            artifact=o.picture,
        )
        bodies: dict[str, dict[str, Any]] = {
            "POST /v1/runs": {"goal": "Sign in", "device": o.device},
            "POST /v1/batches": {"goal": "Sign in", "count": 1},
            "POST /v1/schedules": {"name": "n", "every_s": 60, "goal": "Sign in"},
            "POST /v1/runs/{run_id}/answer": {"blocked": True},
        }
        forms: dict[str, dict[str, str]] = {
            "POST /ui/login": {"token": TOKENS.get(who, "")},
            "POST /ui/logout": {},
            "POST /ui/questions/{run_id}/answer": {"blocked": "1"},
            "POST /ui/memory/{key}/forget": {},
        }
        headers, data = auth(who), None
        if session is not None:
            headers = session.headers
            data = {**forms[route], "csrf": session.csrf} if route in forms else None
            if route == "POST /ui/login":  # a sign-in form's own token, bound to its cookie
                csrf, cookie = login_form(self.client)
                headers = {"Cookie": f"{headers['Cookie']}; {cookie}"}
                data = {**forms[route], "csrf": csrf}
        params = {"all": "true"} if route == "DELETE /v1/memory" else None
        resp = self.client.request(
            method,
            path,
            json=bodies.get(route),
            data=data,
            params=params,
            headers=headers,
            follow_redirects=False,
        )
        self.client.cookies.clear()  # a sign-in's cookie is not the next request's
        return resp.status_code


@dataclass(frozen=True)
class Signed:
    """A console session: its cookie header and its forms' CSRF token."""

    cookie: str
    csrf: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Cookie": f"{CONSOLE_COOKIE}={self.cookie}"}


def login_form(client: TestClient) -> tuple[str, str]:
    """What the sign-in page gives a browser against login CSRF: its form's token and the
    `goalfleet_login` cookie (as a Cookie header) that token is bound to."""
    client.cookies.clear()
    form = client.get("/ui/login")
    login = _CSRF.search(form.text)
    assert login is not None, form.text
    client.cookies.clear()
    return login.group(1), f"goalfleet_login={form.cookies['goalfleet_login']}"


def sign_in(client: TestClient, who: str) -> Signed:
    """Sign `who` in to the console as a person would (the login form), and read the CSRF
    token its pages' forms carry. The client keeps no cookie: each request names its own."""
    csrf, cookie = login_form(client)
    resp = client.post(
        "/ui/login",
        data={"token": TOKENS[who], "csrf": csrf},
        headers={"Cookie": cookie},
        follow_redirects=False,
    )
    assert resp.status_code == 303, resp.text
    cookie = resp.cookies[CONSOLE_COOKIE]
    client.cookies.clear()
    page = client.get("/ui/questions", headers={"Cookie": f"{CONSOLE_COOKIE}={cookie}"})
    found = _CSRF.search(page.text)
    assert found is not None, page.text
    return Signed(cookie, found.group(1))


@contextmanager
def world(redis_url: str, prefix: str, tmp: Path) -> Iterator[World]:
    """The app with every token of `TOKENS` (their `ROLES`) under key prefix `prefix`, its
    pictures and history under `tmp`; every key of `prefix` removed after."""
    db = redis_client(redis_url)
    settings = Settings(
        redis_url=redis_url,
        key_prefix=prefix,
        api_tokens=[f"{name}:{token}" for name, token in TOKENS.items()],
        api_roles=ROLES,
        artifact_dir=tmp / "pictures",
        database_url=f"sqlite:///{tmp / 'history.db'}",
    )
    app = create_app(settings, enqueuer=RecordingEnqueuer.of(settings))
    try:
        with TestClient(app) as client:
            yield World(client, settings, db)
    finally:
        with contextlib.suppress(redis.ConnectionError):  # a test may have stopped Redis
            for key in db.scan_iter(match=f"{prefix}:*"):
                db.delete(key)
        db.close()


def app_routes(app: FastAPI) -> set[str]:
    """Every `METHOD path` the app serves (HEAD aside: Starlette adds it to each GET)."""
    out = set()
    for route in app.router.routes:
        if isinstance(route, APIRoute | Route):
            out |= {f"{m} {route.path}" for m in route.methods or () if m != "HEAD"}
    return out
