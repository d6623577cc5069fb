"""Placement by one scheduler against two on the same Redis, same run: placements/s, scheduler
CPU per run placed, and a check of 0 double placements from their action logs.

No workers: `--devices` synthetic devices are registered in a private redis-server (presence
records and leases only, as `goalfleet worker` writes them) and `--devices` runs are submitted
(batches), so every placement finds an idle device and placement is the bottleneck. Each
scheduler is its own process (`--child`): the real `Dispatcher` with the real Celery sender
(`CeleryEnqueuer`: the messages pile up on the devices' queues, nobody consumes them), passes
until nothing is pending. Each child logs every (run, device) it placed (its action log) and
its own CPU (utime + stime from /proc/self/stat) over the passes. A round is one fleet
(a fresh key prefix) placed by 1 or by 2 schedulers started together; rounds alternate.

    .venv/bin/python -m bench.bench_schedulers                      # 4,000 runs, 3 rounds a side
    .venv/bin/python -m bench.bench_schedulers --devices 1000 --rounds 1   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench._fleet import machine, median
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.dispatch.shares import LEASE_S, Shares
from scheduler.local.redis import LocalRedis
from scheduler.service.fleet import new_id
from scheduler.service.requests import BatchSubmit
from scheduler.store.enqueue import CeleryEnqueuer, Unsent
from scheduler.store.runs import FleetStore
from workers.core.model import Platform
from workers.core.records import BatchRecord, DeviceInfo, RunRecord
from workers.fleet.celery_app import make_celery
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.settings import Settings

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s() -> float:
    """This process's CPU (user + system) in seconds, from /proc/self/stat."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class LoggingSender:
    """The real Celery sender, with every (run, device) it sends appended to an action log."""

    def __init__(self, inner: CeleryEnqueuer) -> None:
        self.inner = inner
        self.log: list[tuple[str, str]] = []

    def send_all(self, pairs: Sequence[tuple[str, str]]) -> Unsent:
        unsent = self.inner.send_all(pairs)
        self.log.extend(pairs[: len(pairs) - len(unsent.pairs)])
        return unsent


def child(url: str, prefix: str, out: str) -> None:
    """One scheduler: wait for the go, pass until nothing is pending, write what it did."""
    settings = Settings(redis_url=url, key_prefix=prefix)
    r = redis_client(url)
    store = FleetStore(r, Keys(prefix), retention_s=600)
    shares = Shares(r, Keys(prefix).schedulers)
    sender = LoggingSender(CeleryEnqueuer(make_celery(settings)))
    dispatcher = Dispatcher(
        store,
        sender,
        view_max_age_s=settings.device_view_max_age_s,
        shares=shares,
    )
    dispatcher.view.reload()
    shares.current()  # a member before the go, so the others count it
    r.blpop([f"{prefix}:bench:go"], timeout=60)
    t0, c0 = time.time(), cpu_s()
    while store.pending_count():
        if not dispatcher.dispatch():  # its devices all taken: wait, as the loop waits a wake
            time.sleep(0.005)
    t1, c1 = time.time(), cpu_s()
    Path(out).write_text(json.dumps({"start": t0, "end": t1, "cpu_s": c1 - c0, "log": sender.log}))


def fill(url: str, prefix: str, n: int) -> None:
    """`n` synthetic devices registered (idle, leases held) and `n` selector runs pending,
    written as `Fleet.submit_batch` writes them but not placed (no fast path)."""
    r = redis_client(url)
    keys = Keys(prefix)
    store = FleetStore(r, keys, retention_s=600)
    for i in range(n):
        info = DeviceInfo(id=f"d{i}", platform=Platform.IOS, os_version="17.5")
        store.registry.register(info, lease_holder(worker_name(f"d{i}")), lease_s=3600)
    pend(store, n)
    r.delete(keys.wake)


def pend(store: FleetStore, n: int) -> None:
    """`n` selector runs pending, in batches of 1,000, as `Fleet.submit_batch` writes them."""
    sub = BatchSubmit(goal="Sign in", count=1000)
    request = sub.goal_request()
    for start in range(0, n, 1000):
        now = time.time()
        batch_id = new_id()
        runs = [
            RunRecord(
                id=new_id(),
                request=request,
                selector=sub.selector,
                batch=batch_id,
                priority=sub.priority,
                submitted_at=now,
            )
            for _ in range(min(1000, n - start))
        ]
        batch = BatchRecord(
            id=batch_id,
            total=len(runs),
            created_at=now,
            goal=request.goal,
            runs=tuple(x.id for x in runs),
        )
        store.create(runs, batch=batch)


def round_(url: str, prefix: str, n: int, schedulers: int) -> dict[str, float]:
    fill(url, prefix, n)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sched-"))
    outs = [str(tmp / f"s{i}.json") for i in range(schedulers)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.bench_schedulers", "--child", url, prefix, o]
        )
        for o in outs
    ]
    r = redis_client(url)
    deadline = time.monotonic() + 60
    while r.zcard(Keys(prefix).schedulers) < schedulers and time.monotonic() < deadline:
        time.sleep(0.05)  # each child has read the device view, joined, and waits for the go
    # a share is re-read a third of a lease after it was last read: the go comes after that,
    # so every child's first pass knows every other (one that joined first would otherwise
    # place its first pass alone; measured here is placement, not the joining)
    time.sleep(LEASE_S / 3 + 0.2)
    r.rpush(f"{prefix}:bench:go", *["go"] * schedulers)
    for p in procs:
        if p.wait(timeout=600) != 0:
            raise RuntimeError(f"a scheduler exited {p.returncode}")
    got = [json.loads(Path(o).read_text()) for o in outs]
    logs = [tuple(x) for g in got for x in g["log"]]
    runs = Counter(run for run, _ in logs)
    devices = Counter(dev for _, dev in logs)
    doubles = sum(c - 1 for c in runs.values() if c > 1)
    double_dev = sum(c - 1 for c in devices.values() if c > 1)
    placed = len(runs)
    if placed != n:
        raise RuntimeError(f"{placed} of {n} runs placed")
    span = max(g["end"] for g in got) - min(g["start"] for g in got)
    cpu = sum(g["cpu_s"] for g in got)
    shares = [len(g["log"]) for g in got]
    return {
        "per_s": placed / span,
        "cpu_ms": 1000 * cpu / placed,
        "doubles": doubles + double_dev,
        "min_share": min(shares) / placed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=4000, help="devices = runs per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per side (alternating)")
    ap.add_argument("--child", nargs=3, metavar=("URL", "PREFIX", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    rows: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    with LocalRedis() as server:
        for i in range(args.rounds):
            for k in (1, 2):
                rows[k].append(round_(server.url, f"bss{i}k{k}", args.devices, k))
    print(
        f"{machine()}; {args.devices:,} devices and runs per round, {args.rounds} rounds a side\n"
    )
    print(
        "| schedulers | placements/s (median) | vs 1 | scheduler CPU ms per run | double placements | smallest share |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    one = median([x["per_s"] for x in rows[1]])
    for k, xs in rows.items():
        per_s = median([x["per_s"] for x in xs])
        print(
            f"| {k} | {per_s:,.0f} | {per_s / one:.2f}x | {median([x['cpu_ms'] for x in xs]):.3f} "
            f"| {int(sum(x['doubles'] for x in xs))} | {min(x['min_share'] for x in xs):.0%} |"
        )


if __name__ == "__main__":
    main()
