"""`GET /v1/runs`'s store read at 100,000 stored runs, against a private redis-server.

100,000 runs are written as the API writes a batch's (`RunQueue.create`); 1,000 of them are
claimed and finished `blocked` through the state machine's scripts, spread over the list. Then
pages of 50 are read (`RunList.page`), each query interleaved in rounds, medians reported:

- the newest runs, no filter;
- `status=blocked` submitted in the last hour (the index of runs that ended blocked);
- `status=blocked` on one device (that index, then the records);
- a device no run has (the sparse case: a page reads at most `MAX_SCAN` entries, then hands
  back a cursor).

    .venv/bin/python -m bench.bench_run_list            # 100,000 runs, 30 rounds
    .venv/bin/python -m bench.bench_run_list --quick    # CI: 5,000 runs, 5 rounds
"""

from __future__ import annotations

import argparse
import time
import uuid

from bench._fleet import machine, median
from scheduler.local.redis import LocalRedis
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.listing import RunQuery
from scheduler.store.runs import FleetStore
from workers.core.model import Platform, RunResult, RunStatus
from workers.core.records import DeviceInfo, RunRecord
from workers.core.request import GoalRunRequest
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.state.states import Failure


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    total, rounds = (5_000, 5) if args.quick else (100_000, 30)
    blocked_every = total // 1000
    with LocalRedis().start() as server:
        r = redis_client(server.url)
        store = FleetStore(r, Keys("brl"), retention_s=0)
        enq = RecordingEnqueuer(r, Keys("brl"))
        devices = [f"d{i}" for i in range(10)]
        for d in devices:
            info = DeviceInfo(id=d, platform=Platform.IOS, os_version="17.5")
            store.registry.register(info, lease_holder(worker_name(d)), lease_s=3600)
        request = GoalRunRequest(goal="Sign in")
        now = time.time()
        t0 = time.perf_counter()
        ids: list[str] = []
        for start in range(0, total, 1000):
            chunk = [
                RunRecord(
                    id=uuid.uuid4().hex,
                    request=request,
                    submitted_at=now - 3 * 3600 + 3 * 3600 * (start + i) / total,
                )
                for i in range(min(1000, total - start))
            ]
            store.create(chunk)
            ids += [c.id for c in chunk]
        for n, rid in enumerate(ids[::blocked_every]):
            d = devices[n % len(devices)]
            store.reserve(rid, d)
            enq.send_all([(rid, d)])
            claim = store.runs.claim(rid, d, f"w@{d}", cap=3)
            record = store.load(rid)
            if record is None or not claim.token:
                raise SystemExit(f"run {rid} could not be claimed")
            store.runs.finish(
                record,
                claim.token,
                RunResult(status=RunStatus.BLOCKED, goal="Sign in"),
                failure=Failure.DECISION,
                quarantine_after=10**6,
                retention_s=0,
            )
        setup_s = time.perf_counter() - t0
        queries = {
            "newest 50, no filter": RunQuery(),
            "status=blocked, since 1 h": RunQuery(status=RunStatus.BLOCKED, since=now - 3600),
            "status=blocked, device=d3": RunQuery(status=RunStatus.BLOCKED, device="d3"),
            "device=nope (sparse: one bounded scan)": RunQuery(device="nope"),
        }
        ms: dict[str, list[float]] = {k: [] for k in queries}
        found: dict[str, int] = {}
        for _ in range(rounds):
            for name, q in queries.items():
                t = time.perf_counter()
                page = store.listing.page(q)
                ms[name].append((time.perf_counter() - t) * 1000)
                found[name] = len(page.runs)
        print(f"# The run list at {total:,} stored runs ({machine()}; set-up {setup_s:.1f} s)")
        print()
        print("| query (pages of 50) | runs on the page | p50 ms | max ms |")
        print("| --- | ---: | ---: | ---: |")
        for name in queries:
            print(f"| {name} | {found[name]} | {median(ms[name]):.1f} | {max(ms[name]):.1f} |")


if __name__ == "__main__":
    main()
