"""Who may do what, on every route (`workers.core.access`, docs/fleet.md "Roles").

The route x role table below is checked against the app's own route list: a route added
without a row fails `test_every_route_has_a_row`. Each cell is the status one request gets,
made as that role against things `alice` (a `submit` token) owns, freshly made for the cell:
a parked run with a step picture, a batch, a schedule, a memory entry. `bob` is another
`submit` token: what is alice's is not found to him. Then the two-token scenario of issue 32,
step by step, with a real Redis and the real app (in process).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from clikit import goalfleet
from conftest import create
from fastapi.testclient import TestClient
from rolekit import EMAIL, TOKENS, World, app_routes, auth, sign_in
from rolekit import world as roles_world
from structlog.testing import capture_logs

from scheduler.errors import AmbiguousIdError
from scheduler.local.redis import LocalRedis
from scheduler.service.run_ids import RunIds
from scheduler.service.schedules import Schedules
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.memory import Remembered
from workers.core.model import (
    Outcome,
    RunStatus,
    StepRow,
)
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest
from workers.fleet.artifacts import artifact_id, artifacts
from workers.fleet.connections import redis_client
from workers.fleet.keys import worker_name
from workers.fleet.memory_store import RedisMemory
from workers.settings import Settings

pytestmark = pytest.mark.fleet

PREFIX = "gfroles"
WHO = ("none", "reader", "alice", "bob", "answerer", "ops")
"""The table's columns: no token, then one token per role (alice owns what is asked about)."""

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
    # the same rule; a parked run has no failure report (yet): 404 where the rule lets one in
    # (tests/console serves a blocked run's final picture to its owner)
    "GET /v1/runs/{run_id}/final/screenshot":      (401, 403, 404, 404, 404, 404),
    # the same rule again; the parked run has no video (yet): 404 where the rule lets one in
    "GET /v1/runs/{run_id}/video":                 (401, 403, 404, 404, 404, 404),
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
    "GET /ui/runs/{run_id}/video":                 (303, 303, 303, 303, 303, 303),
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


@pytest.fixture(scope="module")
def world(redis_server: LocalRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with roles_world(redis_server.url, PREFIX, tmp_path_factory.mktemp("roles")) as w:
        yield w


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


SIGNED = ("reader", "alice", "bob", "answerer", "ops", "erin")
"""The console table's columns: a console session of each role (`erin` reads all and submits
her own; alice owns what is asked about)."""

CONSOLE: dict[str, tuple[int, int, int, int, int, int]] = {
    #                                              read alice bob answer admin erin
    "GET /ui":                                     (303, 303, 303, 303, 303, 303),
    "GET /ui/login":                               (200, 200, 200, 200, 200, 200),
    "POST /ui/login":                              (303, 303, 303, 303, 303, 303),
    "GET /ui/static/{name}":                       (200, 200, 200, 200, 200, 200),
    "GET /ui/fleet":                               (200, 200, 200, 200, 200, 200),
    "GET /ui/fleet/rows":                          (200, 200, 200, 200, 200, 200),
    "GET /ui/runs":                                (200, 200, 200, 403, 200, 200),
    "GET /ui/runs/{run_id}":                       (200, 200, 404, 403, 200, 200),
    "GET /ui/runs/{run_id}/rows":                  (200, 200, 404, 403, 200, 200),
    # as GET /v1/runs/{run_id}/steps/{index}/screenshot answers (alice's run waits)
    "GET /ui/runs/{run_id}/pictures/{artifact}":   (403, 200, 404, 200, 200, 403),
    # the pictures' rule; the parked run has no video: 404 where the rule lets one in
    "GET /ui/runs/{run_id}/video":                 (403, 404, 404, 404, 404, 403),
    "GET /ui/questions":                           (200, 200, 200, 200, 200, 200),
    "GET /ui/questions/{run_id}":                  (200, 200, 404, 200, 200, 200),
    "POST /ui/questions/{run_id}/answer":          (403, 403, 403, 303, 303, 403),
    "GET /ui/memory":                              (200, 403, 403, 403, 200, 200),
    "POST /ui/memory/{key}/forget":                (403, 403, 403, 403, 303, 403),
    "POST /ui/logout":                             (303, 303, 303, 303, 303, 303),  # last
}  # fmt: skip
"""The console's routes as each role's signed-in session meets them: the API's answers (404
for another's run, 403 for what the roles never grant), as pages, redirects and forms."""


def test_every_console_route_has_a_row(world: World) -> None:
    """The console table names exactly the app's `/ui` routes: a new page needs its row."""
    served = {r for r in app_routes(world.client.app) if r.split(" ")[1].startswith("/ui")}  # type: ignore[arg-type]
    assert served == set(CONSOLE), (
        f"routes without a row: {sorted(served - set(CONSOLE))}; "
        f"rows without a route: {sorted(set(CONSOLE) - served)}"
    )


@pytest.mark.parametrize("who", SIGNED)
def test_console_route_by_role(world: World, who: str) -> None:
    """Each console route answers `who`'s session as its row says (things made per cell)."""
    column = SIGNED.index(who)
    session = sign_in(world.client, who)
    got = {route: world.call(route, who, world.owned(), session) for route in CONSOLE}
    want = {route: row[column] for route, row in CONSOLE.items()}
    assert got == want


def test_a_picture_is_served_only_through_its_own_run(world: World) -> None:
    """A picture id alone grants nothing: through a run one may see (one's own, or one that
    waits for an answer), another run's picture is not found, as an unknown one is; in the
    console and in the API alike."""
    w, c = world, world.client
    alice = w.parked("alice")
    picture = artifact_id(World.picture(alice))
    assert picture in c.get(f"/ui/runs/{alice}", headers=sign_in(c, "ops").headers).text
    for who in ("erin", "bob", "answerer"):
        own = w.parked("bob" if who == "answerer" else who)  # answerer: any waiting run
        session = sign_in(c, who)
        mine = c.get(f"/ui/runs/{own}/pictures/{artifact_id(World.picture(own))}",
                     headers=session.headers)  # fmt: skip
        assert mine.status_code == 200, (who, mine.text)
        theirs = c.get(f"/ui/runs/{own}/pictures/{picture}", headers=session.headers)
        assert theirs.status_code == 404, (who, theirs.status_code)
        assert theirs.content != World.picture(alice)
    unknown = c.get(f"/ui/runs/{'0' * 32}/pictures/{picture}", headers=sign_in(c, "bob").headers)
    hidden = c.get(f"/ui/runs/{alice}/pictures/{picture}", headers=sign_in(c, "bob").headers)
    assert (unknown.status_code, hidden.status_code) == (404, 404)


def test_a_picture_a_replaced_row_showed_is_still_served_through_its_run(world: World) -> None:
    """A run claimed again (redelivered, or run again after an answer) writes its rows anew:
    a page drawn before still shows the old rows' pictures, which stay the run's own (and
    another run's strangers)."""
    w, c = world, world.client
    did = w.device()
    run = str(w.post("alice", "/v1/runs", {"goal": "Sign in", "device": did})["id"])
    shown = []
    for attempt in (b"first", b"again"):
        claim = w.runs.claim(run, did, worker_name(did), cap=3)
        picture = artifacts(w.settings).put(World.picture(run) + attempt)
        row = StepRow(index=1, screen="Sign in", refs_generation="s1", candidates=2,
                      outcome=Outcome.ACTED, screenshot=picture)  # fmt: skip
        w.runs.write_step(run, claim.token, row)
        shown.append(picture)
    assert [
        StepRow.model_validate_json(v).screenshot for v in w.db.hvals(w.keys.steps(run))
    ] == shown[1:]  # the first row is gone
    session = sign_in(c, "alice")
    for picture in shown:
        got = c.get(f"/ui/runs/{run}/pictures/{picture}", headers=session.headers)
        assert got.status_code == 200, (picture, got.text)
    other = w.parked("alice")
    stranger = c.get(f"/ui/runs/{other}/pictures/{shown[0]}", headers=session.headers)
    assert stranger.status_code == 404


def test_the_console_tells_an_answerer_no_more_than_the_api(world: World) -> None:
    """An answerer reads no runs: once a run waits for no answer, its question page shows
    nothing of it (403, as GET /v1/runs/{id} answers), nor does an unknown run's."""
    w, c = world, world.client
    run = w.parked("alice")
    session = sign_in(c, "answerer")
    assert c.get(f"/ui/questions/{run}", headers=session.headers).status_code == 200
    answered = c.post(f"/v1/runs/{run}/answer", json={"blocked": True}, headers=auth("answerer"))
    assert answered.status_code == 200, answered.text
    api = c.get(f"/v1/runs/{run}", headers=auth("answerer"))
    page = c.get(f"/ui/questions/{run}", headers=session.headers)
    unknown = c.get(f"/ui/questions/{'0' * 32}", headers=session.headers)
    assert (api.status_code, page.status_code, unknown.status_code) == (403, 403, 403)
    assert c.get(f"/ui/questions/{run}", headers=sign_in(c, "reader").headers).status_code == 200


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
    assert got.content == World.picture(run)
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
