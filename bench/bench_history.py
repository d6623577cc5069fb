"""The run history in PostgreSQL: the three questions over 1,000,000 stored steps, and how many
finished runs a second the outbox's writer stores.

Queries: 100,000 runs of 10 steps (1,000,000 steps) over 30 days, 20 flows, 200 devices in 8
classes, one device failing often, are loaded (COPY, with their step-time counts) into a
scratch database on the PostgreSQL
server given (default: the machine's, 127.0.0.1:5432; the database is dropped afterwards),
then ANALYZEd. Each question (`SqlHistory.pass_rates`, `.step_times` by day, `.outliers`) is
asked over the last 7 days and over all 30, rounds interleaved, medians reported.

Writer: N runs of 10 steps are ended through the fleet's real scripts (submit, claim, steps,
finish) in a private redis-server with the outbox on, then `HistoryWriter.drain()` stores them
(slices of 500); runs/s is N over the drain's time. Its baseline, in the same rounds,
interleaved: the bare `SqlHistory.write` of the same rows (no Redis read, no acknowledgement).

    .venv/bin/python -m bench.bench_history            # 1,000,000 steps, 7 rounds; 5,000 runs x 3
    .venv/bin/python -m bench.bench_history --quick    # 50,000 steps, 3 rounds; 1,000 runs x 1
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator

import psycopg

from bench._fleet import machine, median
from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.history import hist
from scheduler.store.history.outbox import HistoryWriter
from scheduler.store.history.rows import RUN_COLUMNS, STEP_COLUMNS
from scheduler.store.history.store import SqlHistory
from scheduler.store.runs import FleetStore
from workers.core.model import Outcome, Platform, RunResult, RunStatus, StepRow
from workers.core.records import DeviceInfo, RunRecord
from workers.core.request import GoalRunRequest
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure

DAY = 86_400
SERVER = "postgresql://postgres@127.0.0.1:5432/"


@contextlib.contextmanager
def scratch(server: str) -> Iterator[str]:
    name = f"gf_bench_{uuid.uuid4().hex[:10]}"
    parts = urllib.parse.urlsplit(server)
    admin = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urllib.parse.urlunsplit(parts._replace(path="/" + name))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def check(ok: bool, what: object) -> None:  # noqa: FBT001 - a condition
    if not ok:
        msg = f"the benchmark's own check failed: {what}"
        raise RuntimeError(msg)


def _tsv(rows: list[tuple[object, ...]]) -> str:
    out = io.StringIO()
    for row in rows:
        out.write("\t".join("\\N" if v is None else str(v) for v in row) + "\n")
    return out.getvalue()


def load(url: str, runs: int, steps_per_run: int, now: float) -> None:
    rng = random.Random(28)
    flows = [f"Flow {i:02d}" for i in range(20)]
    classes = [f"ios/iPhone{12 + i}/17" for i in range(4)] + [
        f"android/Pixel{5 + i}/14" for i in range(4)
    ]
    devices = [(f"dev{i:03d}", classes[i % len(classes)]) for i in range(200)]
    run_rows: list[tuple[object, ...]] = []
    step_rows: list[tuple[object, ...]] = []
    last: dict[tuple[str, str], int] = {}  # the flip of each run, as the write sets it
    for i in range(runs):
        rid = f"r{i:07d}"
        device, cls = devices[i % len(devices)]
        flow = flows[rng.randrange(len(flows))]
        at = now - 30 * DAY * (1 - i / runs)
        fails = 0.5 if device == "dev007" else 0.08
        status = "blocked" if rng.random() < fails else "done"
        passed = int(status == "done")
        prev = last.get((flow, device))
        last[flow, device] = passed
        run_rows.append(
            (rid, 1, "", "", flow, flow, device, cls, cls.split("/")[0], "{}", status,
             passed, 1, "", "", at - 8, at - 7, at, steps_per_run, 6000.0,
             500.0, 4000.0, 1500.0, 2000, 100, "{}", 0.0, int(prev is not None),
             int(prev is not None and prev != passed))
        )  # fmt: skip
        step_rows.extend(
            (rid, 1, s, flow, at, "Sign in", "press 'Continue'", "acted",
             rng.lognormvariate(3, 0.5), rng.lognormvariate(6, 0.7),
             rng.lognormvariate(4, 0.4), "rules", "")
            for s in range(1, steps_per_run + 1)
        )  # fmt: skip
    counts = hist.counts((r[3], r[4], r[8], r[9], r[10]) for r in step_rows)  # type: ignore[misc]
    hist_rows: list[tuple[object, ...]] = [
        (*g, sum(c.values()), hist.dumps(c)) for g, c in counts.items()
    ]
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        for table, cols, rows in (
            ("runs", RUN_COLUMNS, run_rows),
            ("steps", STEP_COLUMNS, step_rows),
            ("step_hist", ("day", "flow", "phase", "steps", "counts"), hist_rows),
        ):
            for start in range(0, len(rows), 100_000):
                with cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
                    copy.write(_tsv(rows[start : start + 100_000]))
        conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE runs")
        conn.execute("VACUUM ANALYZE steps")
        conn.execute("VACUUM ANALYZE step_hist")


def time_queries(url: str, now: float, rounds: int) -> dict[str, list[float]]:
    store = SqlHistory.open(url)
    asks: dict[str, Callable[[], object]] = {}
    for label, days in (("7 days", 7), ("30 days", 30)):
        since = now - days * DAY
        asks[f"pass and flaky rates, {label}"] = lambda s=since: store.pass_rates(s, now)
        asks[f"step p50/p95 by day, {label}"] = lambda s=since: store.step_times(
            s, now, bucket_s=DAY
        )
        asks[f"devices that stand out, {label}"] = lambda s=since: store.outliers(s, now)
    got = store.outliers(now - 30 * DAY, now)
    check(got[0].device == "dev007", got)  # the one device made to fail often stands out most
    times: dict[str, list[float]] = {k: [] for k in asks}
    for _ in range(rounds):
        for name, ask in asks.items():
            t0 = time.perf_counter()
            ask()
            times[name].append((time.perf_counter() - t0) * 1000)
    store.close()
    return times


def _steps(n: int) -> tuple[StepRow, ...]:
    return tuple(
        StepRow(
            index=i,
            screen="Sign in",
            refs_generation="g",
            candidates=3,
            outcome=Outcome.ACTED,
            snapshot_ms=12.0,
            decide_ms=300.0,
            action_ms=40.0,
        )
        for i in range(1, n + 1)
    )


def end_runs(store: FleetStore, rs: RunStore, n: int, steps: int) -> None:
    devices = [f"w{i}" for i in range(8)]
    for d in devices:
        info = DeviceInfo(id=d, platform=Platform.IOS, os_version="17.5", model="iPhone15")
        store.registry.register(info, lease_holder(worker_name(d)), lease_s=3600)
    rows = _steps(steps)
    enq = RecordingEnqueuer(store.r, store.k)
    for i in range(n):
        d = devices[i % len(devices)]
        run = RunRecord(
            id=uuid.uuid4().hex, request=GoalRunRequest(goal="Sign in"), submitted_at=time.time()
        )
        store.submit_one(run, idem=None, max_pending=10**6, device=d)
        enq.send_all([(run.id, d)])
        claim = rs.claim(run.id, d, f"w@{d}", cap=3)
        record = store.load(run.id)
        check(record is not None, run.id)
        assert record is not None  # noqa: S101 - for mypy: `check` raised otherwise
        with store.r.pipeline(transaction=False) as p:
            for row in rows:
                p.hset(store.k.steps(run.id), str(row.index), row.model_dump_json())
            p.execute()
        result = RunResult(status=RunStatus.DONE, goal="Sign in", steps=rows)
        ended = rs.finish(
            record, claim.token, result, failure=Failure.NONE, quarantine_after=3, retention_s=60
        )
        check(ended, run.id)


def time_writer(url: str, n: int, steps: int, rounds: int) -> dict[str, list[float]]:
    """Runs/s of the writer's drain and of the bare write of the same rows; rounds
    interleaved, the outbox and the tables put back between them."""
    out: dict[str, list[float]] = {"drain": [], "bare write": []}
    with LocalRedis().start() as server:
        r = redis_client(server.url)
        store = FleetStore(r, Keys("bh"), retention_s=3600)
        history = SqlHistory.open(url)
        writer = HistoryWriter(store, history, retention_s=3600)
        writer.turn_on()
        end_runs(store, RunStore(r, Keys("bh")), n, steps)
        entries = r.zrange(store.k.history_outbox, 0, -1, withscores=True)
        ids = [i for i, _ in entries]
        check(len(ids) == n, len(ids))
        rows = [h for i in range(0, n, 500) for h in writer._load(ids[i : i + 500])]  # noqa: SLF001

        def bare() -> int:
            for i in range(0, n, 500):
                history.write(rows[i : i + 500])
            return n

        for _ in range(rounds):
            for name, run in (("drain", writer.drain), ("bare write", bare)):
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("TRUNCATE runs, steps, step_hist")
                r.zadd(store.k.history_outbox, dict(entries))
                t0 = time.perf_counter()
                done = run()
                out[name].append(n / (time.perf_counter() - t0))
                (count,) = history.db.query("SELECT COUNT(*) FROM steps")[0]
                check(done == n and count == n * steps, (name, done, count))
        r.delete(store.k.history_outbox)
        history.close()
        r.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--server", default=SERVER, help="a PostgreSQL server (a scratch db is made)")
    args = ap.parse_args()
    runs, rounds, writer_runs = (5_000, 3, 1_000) if args.quick else (100_000, 7, 5_000)
    writer_rounds = 1 if args.quick else 3
    now = time.time()
    print(machine())
    with scratch(args.server) as url:
        SqlHistory.open(url, upgrade=True).close()
        t0 = time.perf_counter()
        load(url, runs, 10, now)
        print(f"loaded {runs:,} runs, {runs * 10:,} steps in {time.perf_counter() - t0:.1f} s")
        times = time_queries(url, now, rounds)
        print(f"| question ({runs * 10:,} steps stored) | median ms | max ms |")
        print("| --- | ---: | ---: |")
        for name, ms in times.items():
            print(f"| {name} | {median(ms):.1f} | {max(ms):.1f} |")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("TRUNCATE runs, steps, step_hist")
        rates = time_writer(url, writer_runs, 10, writer_rounds)
        print(
            f"| {writer_runs:,} finished runs of 10 steps into PostgreSQL | runs/s (median) | each round |"
        )
        print("| --- | ---: | --- |")
        for name, per in rates.items():
            each = " · ".join(f"{x:,.0f}" for x in per)
            print(f"| {name} | {median(per):,.0f} | {each} |")


if __name__ == "__main__":
    main()
