"""A person's answer is one transition (issue 44, finding 2): the check that the run still
waits for that question, the memory write and the requeue (or end) happen together, so a
refused answer teaches the fleet nothing. Raced over real HTTP (uvicorn, a real Redis)
hundreds of times in both orders, answer against cancel and answer against answer, memory
read after each: no refused answer leaves an entry, the winner's entry is the one kept, and
no request ever gets a 5xx."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from conftest import Served, create
from fastapi import FastAPI
from storekit import CHOOSER, park

from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import RecordingEnqueuer
from workers.core.memory import Target, memory_key
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.core.screen import Kind
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.memory_store import RedisMemory
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.questions import QuestionStore
from workers.fleet.state.runs import RunStore
from workers.settings import Settings

PREFIX = "gfrace"
TOKEN = "race-token-1"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TRIALS = 100
"""Per order and pair: 200 answer-vs-cancel and 200 answer-vs-answer races in all."""
KEY = memory_key(CHOOSER, "rules")


@dataclass
class Race:
    http: httpx.Client
    db: RedisMemory
    runs: RunStore
    questions: QuestionStore
    registry: DeviceRegistry
    n: Iterator[int]

    def parked(self) -> str:
        """A run on a device of its own, claimed and parked for a person; memory empty."""
        did = f"rc-{next(self.n)}"
        info = DeviceInfo(id=did, platform=Platform.IOS, os_version="17.5")
        self.registry.register(info, lease_holder(worker_name(did)), lease_s=3600)
        resp = self.http.post("/v1/runs", json={"goal": "Sign in", "device": did})
        assert resp.status_code == 201, resp.text
        run_id = str(resp.json()["id"])
        claim = self.runs.claim(run_id, did, worker_name(did), cap=3)
        record = self.runs.load(run_id)
        assert record is not None
        park(self.questions, record, claim.token)
        self.db.forget(KEY)
        return run_id

    def race(
        self, first: Callable[[], httpx.Response], second: Callable[[], httpx.Response]
    ) -> tuple[httpx.Response, httpx.Response]:
        """`first` and `second` from two threads released together, the second after a
        random pause of up to a millisecond (so both orders and the overlap are met)."""
        gate = threading.Barrier(2)
        out: list[httpx.Response | None] = [None, None]
        pause = random.uniform(0, 0.001)  # spreads the interleavings

        def go(i: int, call: Callable[[], httpx.Response]) -> None:
            gate.wait()
            if i:
                time.sleep(pause)
            out[i] = call()

        threads = [threading.Thread(target=go, args=(i, c)) for i, c in enumerate((first, second))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        a, b = out
        assert a is not None, "the first request never came back"
        assert b is not None, "the second request never came back"
        return a, b

    def answer(self, run_id: str, target: str) -> Callable[[], httpx.Response]:
        return lambda: self.http.post(f"/v1/runs/{run_id}/answer", json={"target": target})

    def cancel(self, run_id: str) -> Callable[[], httpx.Response]:
        return lambda: self.http.post(f"/v1/runs/{run_id}/cancel")


@pytest.fixture(scope="module")
def race(redis_server: LocalRedis) -> Iterator[Race]:
    db = redis_client(redis_server.url)
    keys = Keys(PREFIX)
    settings = Settings(redis_url=redis_server.url, key_prefix=PREFIX, api_tokens=[TOKEN])
    app: FastAPI = create(settings, enqueuer=RecordingEnqueuer.of(settings))  # type: ignore[assignment]
    served = Served(app)
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    try:
        with httpx.Client(base_url=served.url, headers=AUTH, timeout=30, limits=limits) as http:
            yield Race(
                http=http,
                db=RedisMemory(db, keys, decider="rules", ttl_s=3600),
                runs=RunStore(db, keys),
                questions=QuestionStore(db, keys, retention_s=3600, memory_ttl_s=3600),
                registry=DeviceRegistry(db, keys),
                n=itertools.count(),
            )
    finally:
        served.stop()
        for key in db.scan_iter(match=f"{PREFIX}:*"):
            db.delete(key)
        db.close()


def test_answer_against_cancel_leaves_no_trace_when_refused(race: Race) -> None:
    """Answer and cancel of one parked run, 100 times each way round: every response is
    200 or 409; an answer refused leaves no memory entry; an answer taken leaves its own."""
    traces, server_errors, answered = 0, [], 0
    for trial in range(2 * TRIALS):
        run_id = race.parked()
        answer, cancel = race.answer(run_id, "Continue as ada"), race.cancel(run_id)
        if trial % 2:
            got_cancel, got_answer = race.race(cancel, answer)
        else:
            got_answer, got_cancel = race.race(answer, cancel)
        for resp in (got_answer, got_cancel):
            if resp.status_code >= 500:
                server_errors.append(f"{resp.request.url.path}: {resp.status_code} {resp.text}")
            else:
                assert resp.status_code in {200, 409}, resp.text
        entry = race.db.get(KEY)
        if got_answer.status_code == 200:
            answered += 1
            assert entry is not None, "the answer taken is kept"
            assert entry.target == Target(kind=Kind.BUTTON, name="Continue as ada")
        elif entry is not None:
            traces += 1
    left = f"{traces} of {2 * TRIALS - answered} refused answers left an entry"
    assert (traces, server_errors) == (0, []), left
    assert 0 < answered < 2 * TRIALS, f"{answered} answers won: the race was not run"


def test_two_answers_at_once_keep_only_the_winner(race: Race) -> None:
    """Two people answer one question differently, 100 times each way round: exactly one
    answer is taken (200), the other refused (409); memory holds the winner's choice."""
    wrong, server_errors, first_won = 0, [], 0
    names = ("Continue as ada", "Use another account")
    for trial in range(2 * TRIALS):
        run_id = race.parked()
        order = names if trial % 2 else names[::-1]
        got = race.race(race.answer(run_id, order[0]), race.answer(run_id, order[1]))
        codes = [r.status_code for r in got]
        server_errors += [f"{r.status_code} {r.text}" for r in got if r.status_code >= 500]
        if any(c >= 500 for c in codes):
            continue
        assert sorted(codes) == [200, 409], [r.text for r in got]
        winner = order[codes.index(200)]
        first_won += codes[0] == 200
        entry = race.db.get(KEY)
        if entry is None or entry.target is None or entry.target.name != winner:
            wrong += 1
    held = f"memory held the refused answer (or none) in {wrong} of {2 * TRIALS}"
    assert (wrong, server_errors) == (0, []), held
    assert 0 < first_won < 2 * TRIALS, f"the first answer won {first_won} times: no race"
