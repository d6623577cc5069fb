"""The farm's ceiling (issue 46): the Redis CPU and commands one run costs, apart from the
workers, and the runs a second at which one Redis would spend one full core on them.

The driver is the worker's own path, not a model of it: each run is submitted with
`Fleet.submit_run` (the API's submit; the device is idle, so it is reserved at once, the
scheduler's placement of an idle device's run), then run by `execute_run` as a worker
composes it (the claim, five steps of the sim sign-in app at zero latency, each row written
before the next action, the lease checked by every write, the finish), in this one process.
Redis's CPU is read from its own `INFO cpu` (user + sys, every thread) around each batch, and
its commands from `INFO commandstats`; so 2 cores push one Redis harder than a farm's workers
would, and what Redis spends is measured apart from what the driver spends.

Variants, each its own batches in the same run:
- `no memory`: the rules decide every step (`memory: false`);
- `memory`: every step decided from the fleet's decision memory (a lookup per step);
- `memory + WAIT 1`: the same, on a master with one real replica, every acknowledged write
  waiting for it (`GOALFLEET_REDIS_WAIT_REPLICAS=1`).

    .venv/bin/python -m bench.bench_ceiling            # 5 batches of 200 runs a variant
    .venv/bin/python -m bench.bench_ceiling --quick    # CI: 2 batches of 30
"""

from __future__ import annotations

import argparse
import multiprocessing
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.queues import Queue as QueueType
from multiprocessing.synchronize import Barrier as BarrierType
from multiprocessing.synchronize import Event as EventType
from typing import Any, cast

import redis

from bench._fleet import machine, median
from bench.bench_run_cpu import driver
from scheduler.local.redis import LocalRedis
from testing.sentinels import SentinelLab
from workers.fleet.connections import redis_client
from workers.settings import Settings

WARM_UP = 20
STEPS = 5
"""Steps of the sim sign-in run (fill email, fill password, press Sign in, Welcome, done)."""


@dataclass
class Batch:
    runs: int
    redis_ms: float
    worker_ms: float
    submit_ms: float
    commands: Counter[str] = field(default_factory=Counter)


def _redis_cpu_s(client: redis.Redis) -> float:
    cpu = cast("dict[str, Any]", client.info("cpu"))
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def _commands(client: redis.Redis) -> Counter[str]:
    stats = cast("dict[str, Any]", client.info("commandstats"))
    return Counter({name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()})


@contextmanager
def _server(*, replica: bool) -> Iterator[str]:
    if replica:
        with SentinelLab(replicas=1, sentinels=0) as lab:
            yield f"redis://{lab.data[0].address}/0"
    else:
        with LocalRedis() as server:
            yield server.url


@dataclass(frozen=True)
class Driver:
    """One driver process's part of a batch: warm up, wait for the others and the start, then
    `size` runs on `device`, their CPU put on `results`."""

    settings: Settings
    device: str
    memory: bool
    size: int
    ready: BarrierType
    start: EventType
    results: QueueType[list[tuple[float, float]]]

    def __call__(self) -> None:
        one = driver(self.settings, memory=self.memory, device=self.device)
        for _ in range(WARM_UP):  # scripts loaded, the memory learned, caches warm
            one()
        self.ready.wait(timeout=300)
        self.start.wait(timeout=300)
        self.results.put([one() for _ in range(self.size)])


def variant(
    url: str, *, memory: bool, wait: int, batches: int, size: int, drivers: int
) -> list[Batch]:
    """`batches` measured windows, each `drivers` processes making `size` runs apiece on
    their own devices at once: Redis serves them as it serves a farm's workers, several
    clients' commands ready at each wake-up, not one client's in turn."""
    settings = Settings(
        redis_url=url,
        key_prefix="ceil",
        screenshots="off",
        lease_s=3600,
        redis_wait_replicas=wait,
    )
    client = redis_client(url)
    client.flushdb()
    mp = multiprocessing.get_context("fork")
    out = []
    for _ in range(batches):
        ready, start, results = mp.Barrier(drivers + 1), mp.Event(), mp.Queue()
        procs = [
            mp.Process(target=Driver(settings, f"d{i}", memory, size, ready, start, results))
            for i in range(1, drivers + 1)
        ]
        for p in procs:
            p.start()
        ready.wait(timeout=300)
        c0, k0 = _redis_cpu_s(client), _commands(client)
        start.set()
        spent = [s for _ in procs for s in results.get(timeout=600)]
        c1, k1 = _redis_cpu_s(client), _commands(client)
        for p in procs:
            p.join()
        k1.subtract(k0)
        k1["info"] -= 2  # this benchmark's own reads
        runs = drivers * size
        out.append(
            Batch(
                runs=runs,
                redis_ms=(c1 - c0) * 1000 / runs,
                worker_ms=sum(w for _, w in spent) * 1000 / runs,
                submit_ms=sum(s for s, _ in spent) * 1000 / runs,
                commands=+k1,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batches", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None, help="runs a driver makes a batch")
    ap.add_argument("--drivers", type=int, default=8, help="driver processes at once")
    args = ap.parse_args()
    batches = args.batches or (2 if args.quick else 5)
    size = args.runs or (10 if args.quick else 60)
    sides = {
        "no memory": {"memory": False, "wait": 0, "replica": False},
        "memory": {"memory": True, "wait": 0, "replica": False},
        "memory + WAIT 1": {"memory": True, "wait": 1, "replica": True},
    }
    results: dict[str, list[Batch]] = {}
    for name, side in sides.items():
        with _server(replica=bool(side["replica"])) as url:
            results[name] = variant(
                url,
                memory=bool(side["memory"]),
                wait=int(side["wait"]),
                batches=batches,
                size=size,
                drivers=args.drivers,
            )
    print(
        f"# The ceiling: Redis per {STEPS}-step run ({batches} batches of {args.drivers} "
        f"drivers x {size} runs, {machine()})\n"
    )
    print(
        "| variant | Redis CPU per run | runs/s at one Redis core | commands per run "
        "| worker CPU per run | submit CPU per run |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, got in results.items():
        redis_ms = median([b.redis_ms for b in got])
        commands = median([sum(b.commands.values()) / b.runs for b in got])
        print(
            f"| {name} | {redis_ms:.3f} ms | {1000 / redis_ms:,.0f} | {commands:.1f} "
            f"| {median([b.worker_ms for b in got]):.2f} ms "
            f"| {median([b.submit_ms for b in got]):.2f} ms |"
        )
    print("\nCommands per run, by command (the last batch of each variant):\n")
    names = sorted({c for got in results.values() for c in got[-1].commands})
    print("| command | " + " | ".join(results) + " |")
    print("| --- |" + " ---: |" * len(results))
    for c in names:
        cells = " | ".join(
            f"{got[-1].commands.get(c, 0) / got[-1].runs:.2f}" for got in results.values()
        )
        print(f"| {c} | {cells} |")


if __name__ == "__main__":
    main()
