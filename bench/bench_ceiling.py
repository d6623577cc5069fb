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
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.queues import Queue as QueueType
from multiprocessing.synchronize import Barrier as BarrierType
from multiprocessing.synchronize import Event as EventType
from typing import Any, cast

import redis

from bench._fleet import machine, median
from bench.bench_run_cpu import driver
from bench.bench_schedulers import fill, pend
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.local.redis import LocalRedis
from scheduler.service.graph import long_lived
from scheduler.store.enqueue import CeleryEnqueuer, Unsent
from scheduler.store.runs import FleetStore
from testing.sentinels import SentinelLab
from workers.core.model import RunResult, RunStatus
from workers.fleet.celery_app import make_celery
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure
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
    exec_ms: float
    """Redis's time executing the run's commands (`INFO commandstats` usec), apart from
    reading, parsing and answering its requests."""
    commands: Counter[str] = field(default_factory=Counter)


def _redis_cpu_s(client: redis.Redis) -> float:
    cpu = cast("dict[str, Any]", client.info("cpu"))
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def _commands(client: redis.Redis) -> Counter[str]:
    stats = cast("dict[str, Any]", client.info("commandstats"))
    return Counter({name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()})


TOP_LEVEL = ("evalsha", "lpush")
"""What a run's requests are, but for one lone read of the cancel flag a run without the
memory makes (`requests_of` counts it; its execution, under a microsecond, is left out here:
`commandstats` cannot tell it from the scripts' own reads)."""


def requests_of(url: str, one: Callable[[], object]) -> int:
    """The requests one run sends Redis (not the commands its scripts run), read with
    MONITOR around one run outside the measured batches, as `tests/unit/test_run_trips.py`
    counts the worker's."""
    marker, stopper = "bench:requests:end", redis_client(url)
    stopper.ping()  # connected before the watch: its handshake is not the run's
    seen: list[str] = []
    watching = threading.Event()

    def watch() -> None:
        with redis_client(url).monitor() as m:
            watching.set()
            for cmd in m.listen():
                if marker in cmd["command"]:
                    return
                if cmd.get("client_type") != "lua" and not cmd["command"].startswith("REPLCONF"):
                    seen.append(cmd["command"])  # (a replica's acknowledgements are not the run's)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    watching.wait(10)
    time.sleep(0.2)  # the MONITOR is in place
    one()
    stopper.get(marker)
    watcher.join(10)
    return len(seen)


def _exec_s(client: redis.Redis, names: tuple[str, ...] = TOP_LEVEL) -> float:
    """Redis's time executing the commands `names` (`INFO commandstats` usec; a script's
    includes the commands it runs), apart from reading, parsing and answering them."""
    stats = cast("dict[str, Any]", client.info("commandstats"))
    return sum(int(stats[f"cmdstat_{n}"]["usec"]) for n in names if f"cmdstat_{n}" in stats) / 1e6


def request_us(clients: int, requests: int = 200_000) -> float:
    """Redis's CPU per request beyond executing it, with `clients` connections sending at once
    (`redis-benchmark`, PING): what reading, parsing and answering a request costs a Redis
    with work waiting, as a farm's Redis has."""
    with LocalRedis() as server:
        client = redis_client(server.url)
        c0, e0 = _redis_cpu_s(client), _exec_s(client, ("ping",))
        subprocess.run(
            ["redis-benchmark", "-p", str(server.port), "-c", str(clients), "-n", str(requests),
             "-t", "ping_mbulk", "-q"],
            check=True, capture_output=True,
        )  # fmt: skip
        c1, e1 = _redis_cpu_s(client), _exec_s(client, ("ping",))
    return ((c1 - c0) - (e1 - e0)) * 1e6 / requests


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
) -> tuple[list[Batch], int]:
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
    probe = driver(settings, memory=memory, device="probe")
    for _ in range(WARM_UP):
        probe()
    requests = requests_of(url, probe)
    mp = multiprocessing.get_context("fork")
    out = []
    for b in range(batches):
        ready, start, results = mp.Barrier(drivers + 1), mp.Event(), mp.Queue()
        procs = [  # each batch's own devices: a device's lease is its driver's for an hour
            mp.Process(target=Driver(settings, f"b{b}d{i}", memory, size, ready, start, results))
            for i in range(1, drivers + 1)
        ]
        for p in procs:
            p.start()
        ready.wait(timeout=300)
        c0, k0, e0 = _redis_cpu_s(client), _commands(client), _exec_s(client)
        start.set()
        spent = [s for _ in procs for s in results.get(timeout=600)]
        c1, k1, e1 = _redis_cpu_s(client), _commands(client), _exec_s(client)
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
                exec_ms=(e1 - e0) * 1000 / runs,
                commands=+k1,
            )
        )
    return out, requests


class TimedSender:
    """The scheduler's real Celery sender, the CPU of its sends added up: what `send_run`
    (Celery's message API) costs a placement, measured apart from the placement around it."""

    def __init__(self, inner: CeleryEnqueuer) -> None:
        self.inner = inner
        self.cpu_s = 0.0

    def send_all(self, pairs: Sequence[tuple[str, str]]) -> Unsent:
        t0 = time.process_time()
        try:
            return self.inner.send_all(pairs)
        finally:
            self.cpu_s += time.process_time() - t0


@dataclass
class Placed:
    runs: int
    cpu_ms: float
    celery_ms: float
    redis_ms: float


def placement(url: str, *, devices: int, waves: int) -> list[Placed]:
    """The scheduler's side: `devices` idle devices and as many pending runs, placed by the
    real `Dispatcher` and Celery sender in this process (`bench_schedulers.fill`); a wave
    more of runs each time every device's run was claimed and finished by the worker's own
    scripts (`RunStore`), its device idle again. The heap is frozen before the
    first wave, as `run_scheduler` freezes it before its loop; wave 0 warms (Celery's queue
    objects made, as a running scheduler has them); each later wave is measured: this
    process's CPU per run placed (what the loop learns of the finishes included:
    `Dispatcher.learn`), the Celery send's share of it, and Redis's CPU."""
    prefix = "place"
    settings = Settings(redis_url=url, key_prefix=prefix)
    client = redis_client(url)
    keys = Keys(prefix)
    store = FleetStore(client, keys, retention_s=600)
    worker = RunStore(client, keys)
    sender = TimedSender(CeleryEnqueuer(make_celery(settings)))
    dispatcher = Dispatcher(store, sender, view_max_age_s=settings.device_view_max_age_s)
    fill(url, prefix, devices)
    long_lived()  # as `run_scheduler` does before its loop
    out = []
    for wave in range(waves + 1):
        if wave:
            for run in store.load_many(cast("list[str]", client.zrange(keys.reserved, 0, -1))):
                claim = worker.claim(run.id, run.device or "", "w", cap=3)
                result = RunResult(status=RunStatus.DONE, reason="done", goal=run.request.goal)
                worker.finish(
                    run, claim.token, result, failure=Failure.NONE, quarantine_after=3,
                    retention_s=600,
                )  # fmt: skip
            pend(store, devices)
        sender.cpu_s, c0, r0 = 0.0, time.process_time(), _redis_cpu_s(client)
        dispatcher.learn(store.wait_wake(0.01))  # what the loop learns of the finishes
        placed = 0
        while store.pending_count():
            placed += dispatcher.dispatch()
        c1, r1 = time.process_time(), _redis_cpu_s(client)
        if wave:
            out.append(
                Placed(
                    runs=placed,
                    cpu_ms=(c1 - c0) * 1000 / placed,
                    celery_ms=sender.cpu_s * 1000 / placed,
                    redis_ms=(r1 - r0) * 1000 / placed,
                )
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batches", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None, help="runs a driver makes a batch")
    ap.add_argument("--drivers", type=int, default=1, help="driver processes at once")
    ap.add_argument("--devices", type=int, default=None, help="devices a placement wave fills")
    args = ap.parse_args()
    batches = args.batches or (2 if args.quick else 5)
    size = args.runs or (10 if args.quick else 60)
    sides = {
        "no memory": {"memory": False, "wait": 0, "replica": False},
        "memory": {"memory": True, "wait": 0, "replica": False},
        "memory + WAIT 1": {"memory": True, "wait": 1, "replica": True},
    }
    results: dict[str, list[Batch]] = {}
    requests: dict[str, int] = {}
    for name, side in sides.items():
        with _server(replica=bool(side["replica"])) as url:
            results[name], requests[name] = variant(
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
    busy_us = request_us(clients=16)
    print(
        "| variant | Redis CPU per run, one client | runs/s at one Redis core | requests per run "
        "| commands per run | executing them | at saturation | runs/s at one core, saturated "
        "| worker CPU per run | submit CPU per run |"
    )
    print("| --- |" + " ---: |" * 9)
    for name, got in results.items():
        redis_ms = median([b.redis_ms for b in got])
        exec_ms = median([b.exec_ms for b in got])
        trips = requests[name]
        busy_ms = exec_ms + trips * busy_us / 1000
        commands = median([sum(b.commands.values()) / b.runs for b in got])
        print(
            f"| {name} | {redis_ms:.3f} ms | {1000 / redis_ms:,.0f} | {trips} | {commands:.1f} "
            f"| {exec_ms:.3f} ms | {busy_ms:.3f} ms | {1000 / busy_ms:,.0f} "
            f"| {median([b.worker_ms for b in got]):.2f} ms "
            f"| {median([b.submit_ms for b in got]):.2f} ms |"
        )
    print(
        f'\n"At saturation": executing the run\'s commands, plus its requests at {busy_us:.1f} us '
        "each, Redis's CPU per request beyond executing it with 16 clients sending at once "
        "(redis-benchmark, PING, in this run); one client waiting on each answer costs Redis "
        "a wake-up per request instead."
    )
    devices = args.devices or (200 if args.quick else 1000)
    with LocalRedis() as server:
        placed = placement(server.url, devices=devices, waves=batches)
    print(
        f"\nThe scheduler: {batches} waves of {devices:,} runs onto {devices:,} idle devices "
        "(warm: a wave placed before), in one process\n"
    )
    print(
        "| scheduler CPU per run | of it the Celery send | placement without it "
        "| runs/s at one scheduler core | Redis CPU per placement |"
    )
    print("| ---: | ---: | ---: | ---: | ---: |")
    cpu = median([p.cpu_ms for p in placed])
    celery = median([p.celery_ms for p in placed])
    print(
        f"| {cpu:.3f} ms | {celery:.3f} ms | {median([p.cpu_ms - p.celery_ms for p in placed]):.3f}"
        f" ms | {1000 / cpu:,.0f} | {median([p.redis_ms for p in placed]):.3f} ms |"
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
