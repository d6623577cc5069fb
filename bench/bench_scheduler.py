"""Scheduler cost against fleet size: N = 10, 100, 1,000, 10,000 registered devices.

No worker processes: N synthetic devices are registered in a private redis-server (presence
records and leases only, as `goalfleet worker` writes them) and a stub consumer stands in for
the workers (it claims and finishes a run the moment the dispatcher sends it, through the
same `RunStore` calls a worker makes). The dispatcher and the submit path run in this
process against that Redis, exactly as the scheduler and the API call them.

The dispatcher runs with the production `device_view_max_age_s` (its cached device view,
`scheduler/dispatch/device_view.py`): the view's full re-read, at most once a second, is inside the
timed calls whenever it falls due, so its cost shows in p95 and in CPU per pass.

Per N, with every device busy and 200 runs pending:
- **pass** — one device's run finishes (not timed), then one scheduler pass as the loop makes
  it (drain the wake list, re-read the device it names, `Dispatcher.dispatch()`) places the
  next pending run on it: p50 / p95 ms, Redis commands
  per pass (INFO total_commands_processed), CPU ms per pass (this process);
- **submit** — `Fleet.submit_run` of a selector run while no device is idle (validation, the
  atomic write, the fast-path dispatch attempt): p50 / p95 ms, commands, and the submits/s one
  process reaches;
- **sweep** — the scheduler's sweep (at most once a second in its loop) with the scheduler's
  own bounds (`overdue_after_s`, `orphan_after_s`) while every device's run is fresh, so
  nothing is due: p50 ms and Redis commands per sweep;
- **lapse check** — the sweep's re-pending of running runs whose worker lost its lease
  (`RunQueue.release_lapsed`, every quarter lease in the scheduler's loop) with every lease
  held: p50 ms and Redis commands per check (one read per running run and per device).

    .venv/bin/python -m bench.bench_scheduler            # full: N up to 10,000, 300 samples
    .venv/bin/python -m bench.bench_scheduler --quick    # CI: N = 10 and 100, 50 samples
    .venv/bin/python -m bench.bench_scheduler --sizes 10,10000   # some N only
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

import redis

from bench._fleet import machine, median, pct
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.local.redis import LocalRedis
from scheduler.service.fleet import Fleet
from scheduler.service.graph import overdue_after_s
from scheduler.service.requests import BatchSubmit, RunSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import Platform, RunResult, RunStatus
from workers.core.records import DeviceInfo
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure
from workers.settings import Settings

BACKLOG = 200
SWEEPS = 20


@dataclass(frozen=True)
class Row:
    n: int
    pass_p50: float
    pass_p95: float
    pass_cmds: float
    pass_cpu: float
    submit_p50: float
    submit_p95: float
    submit_cmds: float
    submits_per_s: float
    sweep_p50: float
    sweep_cmds: float
    lapse_p50: float
    lapse_cmds: float


def commands(r: redis.Redis) -> int:
    return int(r.info("stats")["total_commands_processed"])


class Consumer:
    """Stands in for the workers: takes the messages sent (oldest first, as a worker pops its
    queue) and claims their runs; `finish_one` ends the oldest."""

    def __init__(self, store: FleetStore, runs: RunStore, enq: RecordingEnqueuer) -> None:
        self.store, self.runs, self.enq = store, runs, enq
        self.claimed: list[tuple[str, str, str]] = []  # run, device, claim token

    def take(self) -> None:
        while (raw := self.store.r.rpop(self.enq.key)) is not None:
            rid, did = json.loads(raw)
            claim = self.runs.claim(rid, did, f"w@{did}", cap=3)
            self.claimed.append((rid, did, claim.token))

    def finish_one(self) -> None:
        rid, _, token = self.claimed.pop(0)
        record = self.store.load(rid)
        if record is None:
            raise RuntimeError(f"run {rid} vanished")
        done = RunResult(status=RunStatus.DONE, goal="g")
        self.runs.finish(
            record, token, done, failure=Failure.NONE, quarantine_after=3, retention_s=600
        )


def fill(fleet: Fleet, consumer: Consumer, n: int, *, pending: int = 0) -> None:
    """Register `n` synthetic iOS devices (d0, d1, ...) and submit `n` + `pending` runs: each
    device busy (its run reserved and claimed by `consumer`), `pending` runs waiting."""
    for i in range(n):
        info = DeviceInfo(id=f"d{i}", platform=Platform.IOS, os_version="17.5")
        fleet.store.registry.register(info, lease_holder(worker_name(f"d{i}")), lease_s=3600)
    left = n + pending
    while left:
        count = min(left, 1000)
        fleet.submit_batch(BatchSubmit(goal="Sign in", count=count))
        left -= count
    consumer.take()
    if len(consumer.claimed) != n:
        raise RuntimeError(f"{len(consumer.claimed)} of {n} devices busy after the fill")


def measure(r: redis.Redis, n: int, samples: int) -> Row:
    keys = Keys(f"bs{n}")
    store = FleetStore(r, keys, retention_s=600)
    enq = RecordingEnqueuer(r, keys)
    dispatcher = Dispatcher(store, enq, view_max_age_s=Settings().device_view_max_age_s)
    fleet = Fleet(store, dispatcher, max_pending=1_000_000)
    consumer = Consumer(store, RunStore(r, keys), enq)
    fill(fleet, consumer, n, pending=BACKLOG)

    settings = Settings()
    sweeper = Dispatcher(
        store,
        enq,
        overdue_after_s=overdue_after_s(settings),
        orphan_after_s=settings.orphan_after_s,
        view_max_age_s=settings.device_view_max_age_s,
    )
    sweeper.view.reload()  # the scheduler's view is warm
    sweep_ms: list[float] = []
    sweep_cmds: list[int] = []
    for _ in range(SWEEPS):
        c0, t0 = commands(r), time.perf_counter()
        if sweeper.sweep() != 0:
            raise RuntimeError("a sweep found something due in a fleet of fresh runs")
        t1, c1 = time.perf_counter(), commands(r)
        sweep_ms.append((t1 - t0) * 1000)
        sweep_cmds.append(c1 - c0 - 1)
    lapse_ms: list[float] = []
    lapse_cmds: list[int] = []
    for _ in range(SWEEPS):
        c0, t0 = commands(r), time.perf_counter()
        if store.release_lapsed():
            raise RuntimeError("a lapse check moved a run in a fleet whose leases are all held")
        t1, c1 = time.perf_counter(), commands(r)
        lapse_ms.append((t1 - t0) * 1000)
        lapse_cmds.append(c1 - c0 - 1)

    pass_ms: list[float] = []
    pass_cmds: list[int] = []
    cpu = 0.0
    for _ in range(samples):
        consumer.finish_one()
        c0, t0, p0 = commands(r), time.perf_counter(), time.process_time()
        dispatcher.view.touch(store.wait_wake(0.01))  # what the scheduler's loop does
        sent = dispatcher.dispatch()
        t1, p1, c1 = time.perf_counter(), time.process_time(), commands(r)
        if sent != 1:
            raise RuntimeError(f"a pass after a finish sent {sent} runs, not 1")
        pass_ms.append((t1 - t0) * 1000)
        cpu += p1 - p0
        pass_cmds.append(c1 - c0 - 1)  # the INFO itself
        consumer.take()
        fleet.submit_batch(BatchSubmit(goal="Sign in", count=1))  # keep the backlog

    submit_ms: list[float] = []
    submit_cmds: list[int] = []
    wall0 = time.perf_counter()
    for _ in range(samples):
        c0, t0 = commands(r), time.perf_counter()
        fleet.submit_run(RunSubmit(goal="Sign in"))
        t1, c1 = time.perf_counter(), commands(r)
        submit_ms.append((t1 - t0) * 1000)
        submit_cmds.append(c1 - c0 - 1)
    wall = time.perf_counter() - wall0
    return Row(
        n=n,
        pass_p50=median(pass_ms),
        pass_p95=pct(pass_ms, 0.95),
        pass_cmds=median(pass_cmds),
        pass_cpu=cpu * 1000 / samples,
        submit_p50=median(submit_ms),
        submit_p95=pct(submit_ms, 0.95),
        submit_cmds=median(submit_cmds),
        submits_per_s=samples / wall,
        sweep_p50=median(sweep_ms),
        sweep_cmds=median(sweep_cmds),
        lapse_p50=median(lapse_ms),
        lapse_cmds=median(lapse_cmds),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI: N = 10 and 100, 50 samples")
    ap.add_argument("--sizes", default="", help="comma-separated N (default 10,100,1000,10000)")
    args = ap.parse_args()
    samples = 50 if args.quick else 300
    sizes: tuple[int, ...] = (10, 100) if args.quick else (10, 100, 1000, 10_000)
    if args.sizes:
        sizes = tuple(int(x) for x in args.sizes.split(","))
    with LocalRedis() as server:
        r = redis_client(server.url)
        rows = [measure(r, n, samples) for n in sizes]
    base = rows[0]
    print(f"{machine()}; {samples} samples per N, {BACKLOG} runs pending, every device busy\n")
    print(
        "| N devices | pass p50 ms | p95 | vs N=10 | cmds/pass | CPU ms/pass "
        "| submit p50 ms | p95 | vs N=10 | cmds/submit | submits/s | sweep p50 ms | cmds/sweep "
        "| lapse check p50 ms | cmds/check |"
    )
    print("| --- " * 15 + "|")
    for x in rows:
        print(
            f"| {x.n:,} | {x.pass_p50:.2f} | {x.pass_p95:.2f} | {x.pass_p50 / base.pass_p50:.2f}x "
            f"| {x.pass_cmds:.0f} | {x.pass_cpu:.2f} | {x.submit_p50:.2f} | {x.submit_p95:.2f} "
            f"| {x.submit_p50 / base.submit_p50:.2f}x | {x.submit_cmds:.0f} "
            f"| {x.submits_per_s:.0f} | {x.sweep_p50:.2f} | {x.sweep_cmds:.0f} "
            f"| {x.lapse_p50:.2f} | {x.lapse_cmds:.0f} |"
        )


if __name__ == "__main__":
    main()
