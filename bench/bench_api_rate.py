"""Runs/s the real API accepts over HTTP at N = 10, 1,000, 10,000 registered devices.

Per N, a fresh fleet of separate processes (`bench/_fleet.py`): a private redis-server and
`goalfleet api` (one uvicorn process, production settings except a token and
`GOALFLEET_MAX_PENDING` = 10,000,000, so the backlog limit is never what is measured; log
level INFO, the command's default, so each submit writes its JSON log line, to a file). N
synthetic devices are registered (presence records and leases, as `goalfleet worker` writes
them; no worker processes) and made busy before the API starts: one run each, reserved and
claimed through the workers' own `RunStore` calls (the stub consumer of `bench_scheduler`).

**Every device stays busy, so every accepted run is queued, not dispatched**: the submit does
all it does in production (auth at the edge, body validation, limits, the cached device view's
match, the backlog count, the atomic write, the fast-path dispatch attempt that finds no idle
device, the wake-up for the scheduler) and the pending backlog grows. That is a farm at
capacity, the case where submits pile up fastest. No scheduler process runs (it would only
drain the wake list), no Celery message is sent (nothing is placed).

Load: `--clients` processes (default 6), each one kept-alive HTTP/1.1 connection
(`http.client`) posting back to back for a fixed time after a warm-up:

- **single** — `POST /v1/runs`, one selector run (`{"platform": "ios"}`, which every device
  matches) per request;
- **batch** — `POST /v1/batches` with `count` = 100 (the same selector): runs accepted per
  second is 100 x the 201s per second, a different thing from requests/s.

Reported per N and kind: requests, runs accepted per second of wall time (201s only),
p50 / p95 ms per request (as the client sees it), errors (anything but 201, 429 and 503; must
be 0), refusals (429 / 503, counted apart), CPU of the API process(es) and of redis-server as
a share of one core, the API's CPU per accepted request (the figure least moved by other load),
the clients' CPU, and the whole machine's busy share (2 cores = 200 %).

`--processes K` starts the API as `goalfleet api --processes K`: K forked processes accepting
on the one port, each with its own device view (the API's CPU is theirs summed).

    .venv/bin/python -m bench.bench_api_rate            # full: N = 10, 1,000, 10,000; 10 s + 5 s
    .venv/bin/python -m bench.bench_api_rate --sizes 10000 --processes 2
    .venv/bin/python -m bench.bench_api_rate --quick    # CI: N = 10, 1.5 s + 0.75 s
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

from bench._fleet import TOKEN, BenchFleet, cpu_jiffies, machine, median, pct, process_cpu_s
from bench.bench_scheduler import Consumer, fill
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.service.fleet import Fleet
from scheduler.store.enqueue import RecordingEnqueuer
from workers.fleet.state.runs import RunStore

BATCH = 100
MAX_PENDING = 10_000_000
SELECTOR = {"platform": "ios"}
RUN = {"goal": "Sign in", "inputs": {"email": "ada@example.com"}, "selector": SELECTOR}
REFUSED = {429, 503}


@dataclass(frozen=True)
class Load:
    """One client's work: post `body` to `path` from `start_at` until `stop_at` (wall clock,
    `time.time()`); requests before `measure_at` are the warm-up and not counted."""

    url: str
    path: str
    body: bytes
    start_at: float
    measure_at: float
    stop_at: float


@dataclass(frozen=True)
class Seen:
    """What one client saw in the measured window."""

    latencies_ms: list[float]
    statuses: dict[int, int]
    """HTTP status -> count; 0 for a transport error (the connection is opened again)."""
    cpu_s: float


def client(load: Load) -> Seen:
    """One kept-alive connection, requests back to back (runs in a pool process)."""
    parts = urlsplit(load.url)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    def connect() -> http.client.HTTPConnection:
        return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)

    conn = connect()
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    time.sleep(max(0.0, load.start_at - time.time()))
    cpu0 = 0.0
    measuring = False
    while (now := time.time()) < load.stop_at:
        if not measuring and now >= load.measure_at:
            measuring, cpu0 = True, time.process_time()
        t0 = time.perf_counter()
        try:
            conn.request("POST", load.path, body=load.body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = connect()
            status = 0
        took = (time.perf_counter() - t0) * 1000
        if measuring:
            latencies.append(took)
            statuses[status] += 1
    conn.close()
    return Seen(latencies, dict(statuses), time.process_time() - cpu0 if measuring else 0.0)


@dataclass(frozen=True)
class Row:
    n: int
    kind: str
    clients: int
    requests: int
    runs_per_s: float
    req_per_s: float
    p50: float
    p95: float
    errors: int
    refused: int
    api_cpu: float
    api_cpu_ms_per_201: float
    redis_cpu: float
    clients_cpu: float
    machine_busy: float


def make_busy(fleet: BenchFleet, n: int) -> None:
    """Register `n` synthetic devices and make each busy (one run reserved and claimed),
    in this process, before the API starts."""
    store = fleet.store()
    enq = RecordingEnqueuer(store.r, store.k)
    inproc = Fleet(store, Dispatcher(store, enq), max_pending=MAX_PENDING)
    fill(inproc, Consumer(store, RunStore(store.r, store.k), enq), n)


def phase(
    pool: ProcessPoolExecutor,
    fleet: BenchFleet,
    url: str,
    *,
    n: int,
    kind: str,
    clients: int,
    warmup_s: float,
    seconds: float,
) -> Row:
    path, body, runs_per_201 = (
        ("/v1/runs", RUN, 1)
        if kind == "single"
        else ("/v1/batches", {**RUN, "count": BATCH}, BATCH)
    )
    start = time.time() + 0.5  # every client is connected and waiting by then
    loads = [
        Load(
            url=url,
            path=path,
            body=json.dumps(body).encode(),
            start_at=start,
            measure_at=start + warmup_s,
            stop_at=start + warmup_s + seconds,
        )
        for i in range(clients)
    ]
    futures = [pool.submit(client, load) for load in loads]
    time.sleep(max(0.0, start + warmup_s - time.time()))
    api_pid = fleet.pid("api")
    redis_pid = fleet.redis.child.pid if fleet.redis.child is not None else 0

    def api_cpu_s() -> float:
        return process_cpu_s(api_pid)  # with its forked processes (`--processes`)

    api0, redis0, (busy0, total0) = api_cpu_s(), process_cpu_s(redis_pid), cpu_jiffies()
    w0 = time.perf_counter()
    time.sleep(max(0.0, loads[0].stop_at - time.time()))
    wall = time.perf_counter() - w0
    api1, redis1, (busy1, total1) = api_cpu_s(), process_cpu_s(redis_pid), cpu_jiffies()
    seen = [f.result() for f in futures]
    statuses: Counter[int] = Counter()
    for s in seen:
        statuses.update(s.statuses)
    latencies = [x for s in seen for x in s.latencies_ms]
    created = statuses[201]
    refused = sum(statuses[c] for c in REFUSED)
    cores = multiprocessing.cpu_count()
    return Row(
        n=n,
        kind=kind,
        clients=clients,
        requests=len(latencies),
        runs_per_s=created * runs_per_201 / wall,
        req_per_s=len(latencies) / wall,
        p50=median(latencies),
        p95=pct(latencies, 0.95),
        errors=len(latencies) - created - refused,
        refused=refused,
        api_cpu=100 * (api1 - api0) / wall,
        api_cpu_ms_per_201=1000 * (api1 - api0) / max(1, created),
        redis_cpu=100 * (redis1 - redis0) / wall,
        clients_cpu=100 * sum(s.cpu_s for s in seen) / wall,
        machine_busy=100 * cores * (busy1 - busy0) / max(1, total1 - total0),
    )


def measure(
    pool: ProcessPoolExecutor,
    n: int,
    *,
    processes: int,
    clients: int,
    seconds: float,
    warmup_s: float,
) -> list[Row]:
    with BenchFleet(max_pending=MAX_PENDING) as fleet:  # started by `with`
        make_busy(fleet, n)
        # INFO, the command's default: one log line per submit
        url = fleet.start_api(loglevel="INFO", processes=processes)
        return [
            phase(
                pool,
                fleet,
                url,
                n=n,
                kind=kind,
                clients=clients,
                warmup_s=warmup_s,
                seconds=seconds if kind == "single" else seconds / 2,
            )
            for kind in ("single", "batch")
        ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI: N = 10, short phases")
    ap.add_argument("--clients", type=int, default=6, help="concurrent HTTP clients")
    ap.add_argument("--sizes", type=int, nargs="*", help="override the N devices to measure")
    ap.add_argument(
        "--processes",
        type=int,
        default=1,
        help="the API's `--processes` (forked processes on one port, each with its own view)",
    )
    args = ap.parse_args()
    sizes, seconds, warmup = ((10,), 1.5, 0.5) if args.quick else ((10, 1000, 10_000), 10.0, 1.0)
    sizes = tuple(args.sizes) if args.sizes else sizes
    ctx = multiprocessing.get_context("fork")  # the clients need nothing of the parent's state
    with ProcessPoolExecutor(max_workers=args.clients, mp_context=ctx) as pool:
        rows = [
            row
            for n in sizes
            for row in measure(
                pool,
                n,
                processes=args.processes,
                clients=args.clients,
                seconds=seconds,
                warmup_s=warmup,
            )
        ]
    print(
        f"{machine()}; `goalfleet api --processes {args.processes}` (uvicorn), {args.clients} client processes "
        f"with one kept-alive connection each; every device busy, so runs queue (none "
        f"dispatched); single = POST /v1/runs (a selector run), batch = POST /v1/batches "
        f"count={BATCH}; {seconds:g} s single, {seconds / 2:g} s batch, after {warmup:g} s "
        "warm-up; CPU as % of one core\n"
    )
    print(
        "| N devices | kind | requests | runs accepted/s | requests/s | p50 ms | p95 ms "
        "| errors | 429/503 | API CPU % | API CPU ms/request | redis CPU % | clients CPU % "
        "| machine busy % |"
    )
    print("| --- " * 14 + "|")
    for x in rows:
        print(
            f"| {x.n:,} | {x.kind} | {x.requests:,} | **{x.runs_per_s:,.0f}** "
            f"| {x.req_per_s:,.0f} | {x.p50:.2f} | {x.p95:.2f} | {x.errors} | {x.refused} "
            f"| {x.api_cpu:.0f} | {x.api_cpu_ms_per_201:.2f} | {x.redis_cpu:.1f} "
            f"| {x.clients_cpu:.0f} "
            f"| {x.machine_busy:.0f} |"
        )
    if any(x.errors for x in rows):
        raise SystemExit("some requests failed (see the errors column)")


if __name__ == "__main__":
    main()
