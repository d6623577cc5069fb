"""Nothing lost on the way to the history: every run the fleet's scripts end joins the outbox in
the same script, and `HistoryWriter` stores each once, whatever happens to the database.

The outage test starts a PostgreSQL of its own (`pgkit.LocalPostgres`, a random loopback
port), stops it for the middle third of a 300-run burst ended through the real finish script
against a real redis-server, and starts it again: all 300 runs are in the database, none
twice, each with its steps, and each got its Redis retention only once it was stored.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pgkit
import pytest
import redis
import storekit

from scheduler.api.observability import FleetCollector
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.history.db import HistorySchemaError
from scheduler.store.history.outbox import HistoryWriter
from scheduler.store.history.store import SqlHistory
from scheduler.store.runs import FleetStore
from workers.core.model import Outcome, RunResult, RunStatus, StepRow
from workers.core.records import BatchRecord, RunRecord
from workers.core.request import GoalRunRequest
from workers.fleet.keys import Keys
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure

DEVICES = ("d1", "d2", "d3", "d4")
RETENTION_S = 3600


def _steps(n: int) -> tuple[StepRow, ...]:
    return tuple(
        StepRow(
            index=i,
            screen="Sign in",
            refs_generation="g",
            candidates=2,
            outcome=Outcome.ACTED,
            snapshot_ms=10.0 * i,
            screenshot=f"{i:064x}",
        )
        for i in range(1, n + 1)
    )


class Burst:
    """Runs submitted for a device, claimed and ended `done` through the fleet's scripts."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.k = Keys(prefix)
        self.store = FleetStore(client, self.k, retention_s=RETENTION_S)
        self.rs = RunStore(client, self.k)
        self.enq = RecordingEnqueuer(client, self.k)
        for d in DEVICES:
            storekit.register(self.store, d)
        self.n = 0

    def end(self, count: int) -> None:
        for _ in range(count):
            self.n += 1
            did = DEVICES[self.n % len(DEVICES)]
            run = RunRecord(
                id=f"run{self.n:04d}",
                request=GoalRunRequest(goal="Sign in"),
                submitted_at=time.time(),
            )
            self.store.submit_one(run, idem=None, max_pending=10_000, device=did)
            claim = self.rs.claim(run.id, did, f"w@{did}", cap=3)
            for row in _steps(2):
                self.rs.write_step(run.id, claim.token, row)
            result = RunResult(status=RunStatus.DONE, goal="Sign in", steps=_steps(2))
            assert self.rs.finish(
                storekit.loaded(self.store, run.id),
                claim.token,
                result,
                failure=Failure.NONE,
                quarantine_after=3,
                retention_s=RETENTION_S,
            )


def _wait_empty(writer: HistoryWriter, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while writer.backlog().runs:
        assert time.monotonic() < deadline, f"outbox still holds {writer.backlog().runs}"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_database_outage_mid_burst_loses_no_run_and_stores_none_twice(
    client: redis.Redis,
) -> None:
    with pgkit.LocalPostgres() as pg:
        history = SqlHistory.open(pg.url, upgrade=True)
        burst = Burst(client, "ho")
        writer = HistoryWriter(burst.store, history, retention_s=RETENTION_S, slice_size=50)
        writer.turn_on()
        stop = threading.Event()
        t = threading.Thread(target=writer.loop, args=(stop,), kwargs={"idle_s": 0.02})
        t.start()
        try:
            burst.end(100)
            _wait_empty(writer, 20)
            pg.stop()
            burst.end(100)  # ended while the database is down: held in the outbox
            time.sleep(1.0)  # the writer meets the outage (and backs off)
            held = writer.backlog()
            assert held.runs == 100
            assert held.age_s(time.time()) > 0.5
            assert client.ttl(burst.k.run("run0150")) == -1  # held, not expiring
            pg.start()
            burst.end(100)
            _wait_empty(writer, 30)
        finally:
            stop.set()
            t.join(timeout=15)
        rows = history.db.query("SELECT COUNT(*), COUNT(DISTINCT run_id) FROM runs")
        assert rows == [(300, 300)]
        steps = history.db.query("SELECT COUNT(*), COUNT(DISTINCT run_id) FROM steps")
        assert steps == [(600, 300)]
        assert 0 < client.ttl(burst.k.run("run0150")) <= RETENTION_S
        assert 0 < client.ttl(burst.k.steps("run0150")) <= RETENTION_S
        assert 0 < client.ttl(burst.k.pictures("run0150")) <= RETENTION_S
        history.close()


def test_a_writer_that_died_after_its_commit_stores_the_slice_again_once(
    client: redis.Redis, tmp_path: Path
) -> None:
    """The slice was committed but never taken off the outbox: the next drain writes the same
    rows again, and the upserts leave one of each."""
    burst = Burst(client, "hd")
    history = SqlHistory.open(f"sqlite:///{tmp_path / 'h.db'}", upgrade=True)
    writer = HistoryWriter(burst.store, history, retention_s=RETENTION_S)
    writer.turn_on()
    burst.end(5)
    ids = client.zrange(burst.k.history_outbox, 0, -1)
    history.write(writer._load(ids))  # committed; the process dies before the ZREM
    assert writer.drain() == 5
    assert history.db.query("SELECT COUNT(*) FROM runs") == [(5,)]
    assert history.db.query("SELECT COUNT(*) FROM steps") == [(10,)]


def test_a_stored_batch_run_keeps_its_batch_as_long_as_itself(
    client: redis.Redis, tmp_path: Path
) -> None:
    """Once the writer stored a batch's run, the run and its rows expire after the retention
    and its batch (which holds the run's request) no sooner, as at a run's end without a
    writer: retention has one owner (`lua/lib/keep.lua`)."""
    burst = Burst(client, "hb")
    history = SqlHistory.open(f"sqlite:///{tmp_path / 'h.db'}", upgrade=True)
    writer = HistoryWriter(burst.store, history, retention_s=RETENTION_S)
    writer.turn_on()
    batch = BatchRecord(id="b1", total=1, created_at=time.time(), goal="Sign in")
    run = RunRecord(
        id="br1", request=GoalRunRequest(goal="Sign in"), submitted_at=time.time(), batch="b1"
    )
    burst.store.create([run], batch=batch)
    client.expire(burst.k.batch("b1"), 5)  # the batch was written long ago
    burst.store.cancel("br1")
    assert client.ttl(burst.k.run("br1")) == -1  # held for the writer
    assert writer.drain() == 1
    assert 0 < client.ttl(burst.k.run("br1")) <= RETENTION_S
    assert client.ttl(burst.k.batch("b1")) >= client.ttl(burst.k.run("br1")) > 0


def test_without_a_writer_runs_end_as_before(client: redis.Redis) -> None:
    """No `{p}:history:on`: no outbox, and the run keeps its retention from its end."""
    burst = Burst(client, "hn")
    burst.end(1)
    assert client.exists(burst.k.history_outbox) == 0
    assert 0 < client.ttl(burst.k.run("run0001")) <= RETENTION_S
    assert client.smembers(burst.k.pictures("run0001")) == {f"{i:064x}" for i in (1, 2)}
    assert 0 < client.ttl(burst.k.pictures("run0001")) <= RETENTION_S  # retention's one owner


def test_every_script_that_ends_a_run_puts_it_in_the_outbox(client: redis.Redis) -> None:
    """Finish (above), cancel and the unplaceable expiry all add the run, once."""
    burst = Burst(client, "hc")
    client.set(burst.k.history_on, "1")
    burst.end(1)
    queued = RunRecord(id="q1", request=GoalRunRequest(goal="g"), submitted_at=time.time())
    burst.store.create([queued])
    burst.store.cancel("q1")
    burst.store.cancel("q1")
    old = RunRecord(id="q2", request=GoalRunRequest(goal="g"), submitted_at=time.time() - 99)
    burst.store.create([old])
    assert burst.store.expire_unplaceable("q2", after_s=1)
    assert sorted(client.zrange(burst.k.history_outbox, 0, -1)) == ["q1", "q2", "run0001"]


def test_a_database_without_tables_holds_the_runs_and_says_the_fix(
    client: redis.Redis, tmp_path: Path
) -> None:
    burst = Burst(client, "hs")
    writer = HistoryWriter(
        burst.store, SqlHistory.open(f"sqlite:///{tmp_path / 'h.db'}"), retention_s=RETENTION_S
    )
    writer.turn_on()
    burst.end(2)
    with pytest.raises(HistorySchemaError, match="goalfleet db upgrade"):
        writer.drain_once()
    assert writer.backlog().runs == 2


def test_the_api_reports_the_backlog_and_its_age(client: redis.Redis, tmp_path: Path) -> None:
    """`goalfleet_history_backlog_runs` and `..._age_seconds` read the outbox at the scrape."""
    burst = Burst(client, "hm")
    client.set(burst.k.history_on, "1")
    burst.end(3)
    oldest = client.zrange(burst.k.history_outbox, 0, 0, withscores=True)[0][1]
    client.zadd(burst.k.history_outbox, {"run0001": oldest - 120_000})
    got = {
        m.name: m.samples[0].value
        for m in FleetCollector(burst.store).collect()
        if m.name.startswith("goalfleet_history")
    }
    assert got["goalfleet_history_backlog_runs"] == 3
    assert 120 <= got["goalfleet_history_backlog_age_seconds"] < 130
