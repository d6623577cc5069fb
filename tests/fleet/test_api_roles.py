"""Who may do what, on every route (`workers.core.access`, docs/fleet.md "Roles").

The route x role table below is checked against the app's own route list: a route added
without a row fails `test_every_route_has_a_row`. Each cell is the status one request gets,
made as that role against things `alice` (a `submit` token) owns, freshly made for the cell:
a parked run with a step picture, a batch, a schedule, a memory entry. `bob` is another
`submit` token: what is alice's is not found to him. Then the two-token scenario of issue 32,
step by step, with a real Redis and the real app (in process).
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clikit import goalfleet
from conftest import create
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import Route
from storekit import park
from structlog.testing import capture_logs

from scheduler.errors import AmbiguousIdError
from scheduler.local.redis import LocalRedis
from scheduler.service.run_ids import RunIds
from scheduler.service.schedules import Schedules
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.memory import Remembered
from workers.core.model import (
    Action,
    ActionKind,
    Outcome,
    Platform,
    RunStatus,
    StepRow,
)
from workers.core.records import DeviceInfo, RunRecord
from workers.core.request import GoalRunRequest
from workers.fleet.artifacts import artifacts
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.memory_store import RedisMemory
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.questions import QuestionStore
from workers.fleet.state.runs import RunStore
from workers.settings import Settings

pytestmark = pytest.mark.fleet

PREFIX = "gfroles"
TOKENS = {
    "reader": "t-reader-1",
    "alice": "t-alice-22",
    "bob": "t-bob-333",
    "answerer": "t-answer-4",
    "ops": "t-ops-55555",
}
ROLES = "reader:read,alice:submit,bob:submit,answerer:answer,ops:admin"
WHO = ("none", "reader", "alice", "bob", "answerer", "ops")
"""The table's columns: no token, then one token per role (alice owns what is asked about)."""
EMAIL = "alice@example.com"
PNG = b"\x89PNG\r\n\x1a\n" + b"picture"

_ = None  # a cell's padding, to keep the table aligned
TABLE: dict[str, tuple[int, int, int, int, int, int]] = {
    #                                              none read alice bob answer admin
    "GET /health":                                 (200, 200, 200, 200, 200, 200),
    "GET /openapi.json":                           (200, 200, 200, 200, 200, 200),
    "GET /docs":                                   (200, 200, 200, 200, 200, 200),
    "GET /docs-assets/{name}":                     (200, 200, 200, 200, 200, 200),
    "GET /redoc":                                  (200, 200, 200, 200, 200, 200),
    "GET /metrics":                                (401, 200, 403, 403, 403, 200),
    "POST /v1/runs":                               (401, 403, 201, 201, 403, 201),
    "GET /v1/runs":                                (401, 200, 200, 200, 403, 200),
    "GET /v1/runs/{run_id}":                       (401, 200, 200, 404, 403, 200),
    "GET /v1/runs/{run_id}/steps":                 (401, 200, 200, 404, 403, 200),
    "GET /v1/runs/{run_id}/steps/{index}/screenshot": (401, 403, 200, 404, 200, 200),
    "POST /v1/runs/{run_id}/cancel":               (401, 403, 200, 404, 403, 200),
    "POST /v1/runs/{run_id}/answer":               (401, 403, 403, 403, 200, 200),
    "POST /v1/batches":                            (401, 403, 201, 201, 403, 201),
    "GET /v1/batches/{batch_id}":                  (401, 200, 200, 404, 403, 200),
    "GET /v1/batches/{batch_id}/runs":             (401, 200, 200, 404, 403, 200),
    "GET /v1/devices":                             (401, 200, 200, 200, 200, 200),
    "POST /v1/schedules":                          (401, 403, 201, 201, 403, 201),
    "GET /v1/schedules":                           (401, 200, 200, 200, 403, 200),
    "DELETE /v1/schedules/{schedule_id}":          (401, 403, 204, 404, 403, 204),
    "GET /v1/memory":                              (401, 200, 403, 403, 403, 200),
    "DELETE /v1/memory":                           (401, 403, 403, 403, 403, 200),
    "GET /v1/memory/{key}":                        (401, 200, 403, 403, 403, 200),
    "DELETE /v1/memory/{key}":                     (401, 403, 403, 403, 403, 204),
    "GET /v1/questions":                           (401, 200, 200, 200, 200, 200),
    # the console: a bearer token opens nothing there (its pages ask for a signed-in session:
    # a page sends the browser to sign in, a live fragment is a 401, a form without its
    # fields a 422); tests/console holds what a session of each role may do
    "GET /ui":                                     (303, 303, 303, 303, 303, 303),
    "GET /ui/login":                               (200, 200, 200, 200, 200, 200),
    "POST /ui/login":                              (422, 422, 422, 422, 422, 422),
    "POST /ui/logout":                             (422, 422, 422, 422, 422, 422),
    "GET /ui/static/{name}":                       (200, 200, 200, 200, 200, 200),
    "GET /ui/fleet":                               (303, 303, 303, 303, 303, 303),
    "GET /ui/fleet/rows":                          (401, 401, 401, 401, 401, 401),
    "GET /ui/runs":                                (303, 303, 303, 303, 303, 303),
    "GET /ui/runs/{run_id}":                       (303, 303, 303, 303, 303, 303),
    "GET /ui/runs/{run_id}/rows":                  (401, 401, 401, 401, 401, 401),
    "GET /ui/runs/{run_id}/pictures/{artifact}":   (303, 303, 303, 303, 303, 303),
    "GET /ui/questions":                           (303, 303, 303, 303, 303, 303),
    "GET /ui/questions/{run_id}":                  (303, 303, 303, 303, 303, 303),
    "POST /ui/questions/{run_id}/answer":          (422, 422, 422, 422, 422, 422),
    "GET /ui/memory":                              (303, 303, 303, 303, 303, 303),
    "POST /ui/memory/{key}/forget":                (422, 422, 422, 422, 422, 422),
    # the run history aggregates every run: read_any (reader, admin)
    "GET /v1/history":                             (401, 200, 403, 403, 403, 200),
    "GET /v1/history/pass-rates":                  (401, 200, 403, 403, 403, 200),
    "GET /v1/history/step-times":                  (401, 200, 403, 403, 403, 200),
    "GET /v1/history/outliers":                    (401, 200, 403, 403, 403, 200),
}  # fmt: skip


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


class World:
    """The app on a real Redis, and a maker of alice's things."""

    def __init__(self, client: TestClient, settings: Settings, db: Any) -> None:
        self.client = client
        self.settings = settings
        self.db = db
        self.keys = Keys(PREFIX)
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
        picture = artifacts(self.settings).put(PNG)
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
        return Owned(run, batch, sched, key, self.device())

    def call(self, route: str, who: str, o: Owned) -> int:
        method, template = route.split(" ")
        name = "swagger-ui.css" if template.startswith("/docs-assets/") else "console.js"
        path = template.format(
            run_id=o.run,
            batch_id=o.batch,
            schedule_id=o.schedule,
            key=o.memory,
            index=1,
            name=name,
            artifact="0" * 64,
        )
        bodies: dict[str, dict[str, Any]] = {
            "POST /v1/runs": {"goal": "Sign in", "device": o.device},
            "POST /v1/batches": {"goal": "Sign in", "count": 1},
            "POST /v1/schedules": {"name": "n", "every_s": 60, "goal": "Sign in"},
            "POST /v1/runs/{run_id}/answer": {"blocked": True},
        }
        body = bodies.get(route)
        params = {"all": "true"} if route == "DELETE /v1/memory" else None
        resp = self.client.request(
            method, path, json=body, params=params, headers=auth(who), follow_redirects=False
        )
        return resp.status_code


@pytest.fixture(scope="module")
def world(redis_server: LocalRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    db = redis_client(redis_server.url)
    settings = Settings(
        redis_url=redis_server.url,
        key_prefix=PREFIX,
        api_tokens=[f"{name}:{token}" for name, token in TOKENS.items()],
        api_roles=ROLES,
        artifact_dir=Path(tmp_path_factory.mktemp("pictures")),
        database_url=f"sqlite:///{tmp_path_factory.mktemp('history') / 'history.db'}",
    )
    app: FastAPI = create(settings, enqueuer=RecordingEnqueuer.of(settings))  # type: ignore[assignment]
    try:
        with TestClient(app) as client:
            yield World(client, settings, db)
    finally:
        for key in db.scan_iter(match=f"{PREFIX}:*"):
            db.delete(key)
        db.close()


def app_routes(app: FastAPI) -> set[str]:
    """Every `METHOD path` the app serves (HEAD aside: Starlette adds it to each GET)."""
    out = set()
    for route in app.router.routes:
        if isinstance(route, APIRoute | Route):
            out |= {f"{m} {route.path}" for m in route.methods or () if m != "HEAD"}
    return out


def test_every_route_has_a_row(world: World) -> None:
    """The table names exactly the app's routes: a new route needs its row."""
    served = app_routes(world.client.app)  # type: ignore[arg-type]
    assert served == set(TABLE), (
        f"routes without a row: {sorted(served - set(TABLE))}; "
        f"rows without a route: {sorted(set(TABLE) - served)}"
    )


@pytest.mark.parametrize("who", WHO)
def test_route_by_role(world: World, who: str) -> None:
    """Each route answers `who` as its row says (every cell on things made for it)."""
    column = WHO.index(who)
    got = {route: world.call(route, who, world.owned()) for route in TABLE}
    want = {route: row[column] for route, row in TABLE.items()}
    assert got == want


def test_alice_and_bob(world: World) -> None:
    """Issue 32's two-token scenario: every step is refused, and nothing of it happened."""
    w, c = world, world.client
    bob_run = w.parked("bob", inputs={"email": "bob@example.com"})
    alice_run = w.parked("alice")
    alice_sched = w.post("alice", "/v1/schedules", {"name": "a", "every_s": 60, "goal": "Sign in"})
    memory = RedisMemory(w.db, w.keys, decider="rules", ttl_s=3600)
    key = uuid.uuid4().hex
    memory.overwrite(Remembered(key=key, done=True, source="human", origin="ops", goal="g"))

    # alice reads bob's run (with its inputs), its steps, its picture: not found
    for path in (f"/v1/runs/{bob_run}", f"/v1/runs/{bob_run}/steps",
                 f"/v1/runs/{bob_run}/steps/1/screenshot", f"/v1/runs/{bob_run[:8]}"):  # fmt: skip
        resp = c.get(path, headers=auth("alice"))
        assert resp.status_code == 404, (path, resp.text)
        assert "bob@example.com" not in resp.text
    # alice answers bob's parked question: forbidden, nothing remembered, still parked
    before = memory.entries()
    resp = c.post(f"/v1/runs/{bob_run}/answer", json={"target": "Use another account"},
                  headers=auth("alice"))  # fmt: skip
    assert resp.status_code == 403, resp.text
    assert resp.json()["error"] == "FORBIDDEN"
    assert "answer or admin" in resp.json()["fix"]
    assert memory.entries() == before
    assert w.runs.load(bob_run).status is RunStatus.AWAITING_ANSWER  # type: ignore[union-attr]
    # bob erases the whole memory, or one entry: forbidden, all still there
    assert c.delete("/v1/memory", params={"all": "true"}, headers=auth("bob")).status_code == 403
    assert c.delete(f"/v1/memory/{key}", headers=auth("bob")).status_code == 403
    assert memory.get(key) is not None
    # alice cancels bob's run: not found, still parked
    assert c.post(f"/v1/runs/{bob_run}/cancel", headers=auth("alice")).status_code == 404
    assert w.runs.load(bob_run).status is RunStatus.AWAITING_ANSWER  # type: ignore[union-attr]
    # bob deletes alice's schedule: not found, still listed for alice
    assert c.delete(f"/v1/schedules/{alice_sched['id']}", headers=auth("bob")).status_code == 404
    listed = c.get("/v1/schedules", headers=auth("alice")).json()
    assert [s["id"] for s in listed if s["id"] == alice_sched["id"]] == [alice_sched["id"]]
    assert all(s["owner"] == "alice" for s in listed)
    # the lists: devices and questions name only alice's own runs to her
    busy = {who: w.busy(who) for who in ("alice", "bob")}  # each holds a device
    for who, sees in (("alice", {busy["alice"]}), ("bob", {busy["bob"]}),
                      ("reader", set(busy.values())), ("answerer", set())):  # fmt: skip
        devices = c.get("/v1/devices", headers=auth(who)).json()
        shown = {d["run"] for d in devices if d["run"]} & set(busy.values())
        assert shown == sees, who
    questions = c.get("/v1/questions", headers=auth("alice")).json()
    assert alice_run in {q["run_id"] for q in questions}
    assert bob_run not in {q["run_id"] for q in questions}
    assert bob_run in {q["run_id"] for q in c.get("/v1/questions", headers=auth("answerer")).json()}
    # the run list: alice's runs alone for her; everyone's for the reader
    mine = c.get("/v1/runs", params={"limit": 200}, headers=auth("alice")).json()["runs"]
    assert {r["owner"] for r in mine} == {"alice"}
    assert alice_run in {r["id"] for r in mine}
    everyone = c.get("/v1/runs", params={"limit": 200}, headers=auth("reader")).json()["runs"]
    assert {"alice", "bob"} <= {r["owner"] for r in everyone}


def test_inputs_only_to_the_owner_and_admin(world: World) -> None:
    """The reader sees bob's run, its inputs and typed values hidden; bob and ops see them."""
    w, c = world, world.client
    run = w.parked("bob", inputs={"email": "bob@example.com"})
    hidden = c.get(f"/v1/runs/{run}", headers=auth("reader")).json()
    assert hidden["request"]["inputs"] == {"email": "<hidden>"}
    rows = c.get(f"/v1/runs/{run}/steps", headers=auth("reader")).json()
    assert rows[0]["action"]["shown_value"] == "<hidden>"
    for who in ("bob", "ops"):
        got = c.get(f"/v1/runs/{run}", headers=auth(who)).json()
        assert got["request"]["inputs"] == {"email": "bob@example.com"}, who
        rows = c.get(f"/v1/runs/{run}/steps", headers=auth(who)).json()
        assert rows[0]["action"]["shown_value"] == "bob@example.com", who
    body = {"name": "b", "every_s": 60, "goal": "Sign in", "inputs": {"email": "b@x.io"}}
    sched = w.post("bob", "/v1/schedules", body)
    seen = {s["id"]: s for s in c.get("/v1/schedules", headers=auth("reader")).json()}
    assert seen[sched["id"]]["batch"]["inputs"] == {"email": "<hidden>"}


def test_an_answerer_sees_the_pictures_of_a_waiting_run_only(world: World) -> None:
    """The picture is what a question is about: whoever may answer sees a waiting run's, as
    the console shows it; once the run waits for no answer, neither the answerer nor the
    reader (no inputs) sees it, its owner and admin still do."""
    w, c = world, world.client
    run = w.parked("bob", inputs={"email": "bob@example.com"})
    shot = f"/v1/runs/{run}/steps/1/screenshot"
    got = c.get(shot, headers=auth("answerer"))
    assert got.status_code == 200, got.text
    assert got.content == PNG
    assert c.get(shot, headers=auth("reader")).status_code == 403
    answered = c.post(f"/v1/runs/{run}/answer", json={"blocked": True}, headers=auth("answerer"))
    assert answered.status_code == 200, answered.text
    refused = c.get(shot, headers=auth("answerer"))
    assert refused.status_code == 403, refused.text
    assert "waits for no answer" in refused.json()["message"]
    for who in ("bob", "ops"):
        assert c.get(shot, headers=auth(who)).status_code == 200, who


def test_idempotency_keys_are_each_owners(world: World) -> None:
    """The same key and body from bob makes bob's own run, never answers with alice's."""
    c = world.client
    did = world.device()
    body = {"goal": "Sign in", "device": did, "inputs": {"email": EMAIL}}
    first = c.post("/v1/runs", json=body, headers={**auth("alice"), "Idempotency-Key": "k-1"})
    again = c.post("/v1/runs", json=body, headers={**auth("bob"), "Idempotency-Key": "k-1"})
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json()["id"] != first.json()["id"]
    assert again.json()["owner"] == "bob"
    replay = c.post("/v1/runs", json=body, headers={**auth("alice"), "Idempotency-Key": "k-1"})
    assert (replay.status_code, replay.json()["id"]) == (200, first.json()["id"])


def test_the_cli_is_refused_as_the_api(world: World, serve: type[Any]) -> None:
    """The CLI goes through the API: a `submit` token's `memory forget --all`, and its
    `answer` to another's run, end with exit 2 and one line saying why; nothing changed."""
    served = serve(world.client.app)
    bob_run = world.parked("bob")
    key = uuid.uuid4().hex
    memory = RedisMemory(world.db, world.keys, decider="rules", ttl_s=3600)
    memory.overwrite(Remembered(key=key, done=True, source="human", origin="ops", goal="g"))
    env = {**os.environ, "GOALFLEET_API_URL": served.url}
    for who, argv, says in (
        ("bob", ("memory", "forget", "--all"), "may not forget decision-memory entries"),
        ("alice", ("answer", bob_run, "--done"), f"no run {bob_run!r}"),  # it reads the run
    ):
        proc = goalfleet(*argv, env={**env, "GOALFLEET_API_TOKEN": TOKENS[who]}, timeout_s=60)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert says in proc.stderr, (argv, proc.stderr)
        assert proc.stderr.count("\n") == 1, proc.stderr
    assert memory.get(key) is not None
    assert world.runs.load(bob_run).status is RunStatus.AWAITING_ANSWER  # type: ignore[union-attr]


def test_a_prefix_never_names_nor_lists_anothers_run(world: World) -> None:
    """Two runs whose ids share a prefix, alice's and bob's: for alice the prefix is her run;
    for the reader (who sees all) it is ambiguous and lists both."""
    stem = uuid.uuid4().hex[:8]
    ids = {who: stem + uuid.uuid4().hex[8:] for who in ("alice", "bob")}
    for who, rid in ids.items():
        run = RunRecord(id=rid, request=GoalRunRequest(goal="g"), submitted_at=1.0, owner=who)
        world.db.hset(world.keys.run(rid), mapping=run.to_hash())
    try:
        assert RunIds(world.db, world.keys).resolve(stem, owner="alice") == ids["alice"]
        assert RunIds(world.db, world.keys).resolve(stem, owner="bob") == ids["bob"]
        with pytest.raises(AmbiguousIdError, match=ids["bob"]):
            RunIds(world.db, world.keys).resolve(stem)
        resp = world.client.get(f"/v1/runs/{stem}/steps", headers=auth("alice"))
        assert resp.status_code == 200, resp.text
        resp = world.client.get(f"/v1/runs/{stem}", headers=auth("reader"))
        assert resp.status_code == 409, resp.text
    finally:
        world.db.delete(*(world.keys.run(rid) for rid in ids.values()))


def test_a_schedules_firings_are_its_owners(world: World) -> None:
    """A schedule alice added fires batches whose runs are alice's: she lists them, bob does
    not see them."""
    c = world.client
    world.device()  # one the batch's selector matches
    world.db.delete(world.keys.schedules)  # the other tests' schedules are not due here
    body = {"name": "owned", "every_s": 3600, "goal": "Sign in", "count": 2}
    sched = world.post("alice", "/v1/schedules", body)
    fleet = c.app.state.fleet  # type: ignore[attr-defined]
    assert Schedules(world.db, world.keys).tick(fleet, now=time.time() + 1) >= 1
    runs = c.get("/v1/runs", params={"schedule": sched["id"]}, headers=auth("ops")).json()["runs"]
    assert len(runs) == 2
    assert {r["owner"] for r in runs} == {"alice"}
    batch = runs[0]["batch"]
    assert c.get(f"/v1/batches/{batch}", headers=auth("alice")).json()["owner"] == "alice"
    assert c.get(f"/v1/batches/{batch}", headers=auth("bob")).status_code == 404
    mine = c.get("/v1/runs", params={"schedule": sched["id"]}, headers=auth("bob")).json()
    assert mine["runs"] == []


def test_several_tokens_without_roles_are_each_admin_and_said_so(
    redis_server: LocalRedis,
) -> None:
    """The back-compat story: without GOALFLEET_API_ROLES every token holds every right (bob
    may forget memory), and an API with several tokens says so at start."""
    settings = Settings(
        redis_url=redis_server.url, key_prefix="gfroles2", api_tokens=["alice:a-1", "bob:b-2"]
    )
    with capture_logs() as logs:
        app = create(settings, enqueuer=RecordingEnqueuer.of(settings))
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["api_roles_unset"]
    db = redis_client(redis_server.url)
    try:
        with TestClient(app) as c:  # type: ignore[arg-type]
            bob = {"Authorization": "Bearer b-2"}
            forgot = c.delete("/v1/memory", params={"all": "true"}, headers=bob)
            assert forgot.status_code == 200, forgot.text
            assert c.get("/v1/runs", headers=bob).status_code == 200
    finally:
        for key in db.scan_iter(match="gfroles2:*"):
            db.delete(key)
        db.close()
