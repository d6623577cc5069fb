"""Dispatch latency, one-way against one-way: submit → the run's first snapshot starting on the
worker, against a bare Celery send → the no-op task body starting, on the same Redis, measured
in the same run.

Fleet (all separate processes, `bench/_fleet.py`): its own redis-server on a random loopback
port, `goalfleet api`, `goalfleet scheduler`, one `goalfleet worker` on a zero-latency sim
device, and a bare Celery worker made from the same settings and flags serving a no-op task.

Paths, interleaved sample by sample so machine noise hits each alike:

- **client**: `scheduler.client.api_client.FleetClient.submit_run` (one kept-alive connection
  of its `httpx.Client`) → API.
- **http, new connection**: a fresh `http.client` connection per submit, as `curl` does.
- **in-process Fleet.submit_run**: the API's own submit code called directly, no HTTP: what
  the HTTP layer costs, by difference.
- **in-process, sent after the script**: the same with the message sent by Celery's
  `send_task` after the submit script reserved the device (the enqueuer builds no message
  for the script to push: how submits sent before the script pushed it), by difference what
  pushing the message in the script saves.
- **baseline**: `noop.apply_async(queue=...)` → the no-op task body starts — the bare Celery
  one-way hop. No round trip anywhere: nothing here waits for a result before its stamp.

Both ends are `CLOCK_MONOTONIC` ns stamps taken in the worker process (comparable across
processes on one machine): "first snapshot starting" is the `open` line the SimDevice writes
to its session log (the fleet's overlap-check seam; the device is opened immediately before
`run_goal`'s first snapshot, with only the cancel-flag read between); "task body starts" is the
`start` line the no-op task writes first thing (`bench/_worker.py`). No production code is
changed. Each run (and each no-op) finishes before the next sample starts.

Percentiles: `workers.stats` (nearest-rank); the tail is p99 from >= 1,000 samples per
path, else p95.

    .venv/bin/python -m bench.bench_dispatch            # full (300 samples per path)
    .venv/bin/python -m bench.bench_dispatch --quick    # CI: proves it runs
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench._fleet import (
    SIGN_IN,
    TOKEN,
    BenchFleet,
    machine,
    median,
    percentile,
    tail_q,
)
from bench._worker import NOOP_DEVICE, NOOP_TASK, noop_starts
from scheduler.client.api_client import FleetClient
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.local.fleet import SimWorker
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import CeleryEnqueuer, Enqueuer
from scheduler.store.runs import FleetStore
from workers.fleet.celery_app import make_celery
from workers.fleet.keys import device_queue

DEVICE = "d1"
BODY: dict[str, Any] = {**SIGN_IN, "device": DEVICE}


@dataclass(frozen=True)
class Sample:
    total_s: float
    """submit called → first snapshot starting."""
    returned_s: float
    """submit called → submit returned (the caller has its run id)."""
    to_handler_s: float
    """submit called → the API created the run record (`submitted_at`)."""
    to_reserved_s: float
    """record created → device reserved (`dispatched_at`): the fast-path dispatch."""
    to_claimed_s: float
    """reserved → claimed on the worker (`started_at`): send, broker, worker, pool child, claim."""
    to_snapshot_s: float
    """claimed → first snapshot: secrets, decider, device open."""


class SessionTail:
    """Reads `<kind> <pid> <monotonic ns>` lines (`open` or `start`) as a worker appends them."""

    def __init__(self, path: Path, kind: str = "open") -> None:
        self.path = path
        self.kind = kind
        self.offset = 0

    def next_stamp(self, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.path.exists():
                with self.path.open() as f:
                    f.seek(self.offset)
                    while True:
                        line = f.readline()
                        if not line.endswith("\n"):
                            break
                        self.offset += len(line)
                        parts = line.split()
                        if parts[0] == self.kind:
                            return int(parts[2])
            time.sleep(0.0005)
        raise TimeoutError(f"no {self.kind!r} line in {self.path} within {timeout_s:g} s")


def wait_finished(store: FleetStore, run_id: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = store.load(run_id)
        if run is not None and run.status.terminal:
            if run.status.value != "done":
                raise RuntimeError(f"run {run_id} ended {run.status.value}: {run.reason}")
            return
        time.sleep(0.003)
    raise TimeoutError(f"run {run_id} did not finish in {timeout_s:g} s")


def measure(store: FleetStore, session: SessionTail, submit: Callable[[], str]) -> Sample:
    wall0, t0 = time.time(), time.monotonic_ns()
    run_id = submit()
    t_ret = time.monotonic_ns()
    t_open = session.next_stamp()
    wait_finished(store, run_id)
    run = store.load(run_id)
    assert run is not None  # noqa: S101 - it just finished
    assert run.dispatched_at is not None  # noqa: S101
    assert run.started_at is not None  # noqa: S101
    opened_wall = wall0 + (t_open - t0) / 1e9  # the worker's monotonic stamp on our wall clock
    return Sample(
        total_s=(t_open - t0) / 1e9,
        returned_s=(t_ret - t0) / 1e9,
        to_handler_s=run.submitted_at - wall0,
        to_reserved_s=run.dispatched_at - run.submitted_at,
        to_claimed_s=run.started_at - run.dispatched_at,
        to_snapshot_s=opened_wall - run.started_at,
    )


def main() -> None:  # noqa: C901, PLR0915 - one linear benchmark script
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--samples", type=int, default=None)
    args = ap.parse_args()
    n = args.samples or (15 if args.quick else 300)
    warmup = 3 if args.quick else 20

    with BenchFleet() as fleet:
        fleet.start_api()
        fleet.start_scheduler()
        fleet.start_noop_worker()
        fleet.start_workers([SimWorker(DEVICE)])
        settings = fleet.require_settings()
        store = fleet.store()
        session = SessionTail(fleet.session_log(DEVICE))
        starts = SessionTail(noop_starts(fleet.dir), kind="start")

        app = make_celery(settings)

        def noop_body() -> None:
            return None

        noop = app.task(name=NOOP_TASK, ignore_result=True)(noop_body)
        noop_queue = device_queue(NOOP_DEVICE)

        def in_process_fleet(enqueuer: Enqueuer) -> Fleet:
            """`Fleet` built as the API builds it (its cached device view included)."""
            dispatcher = Dispatcher(store, enqueuer, view_max_age_s=settings.device_view_max_age_s)
            return Fleet(store, dispatcher, max_pending=settings.max_pending)

        in_process = in_process_fleet(CeleryEnqueuer(app))
        submit_model = RunSubmit.model_validate(BODY)
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        payload = json.dumps(BODY)
        host, port = urlsplit(fleet.api_url).hostname or "", urlsplit(fleet.api_url).port

        with FleetClient(fleet.api_url, token=TOKEN) as client:

            def via_client() -> str:
                return client.submit_run(BODY).id

            def via_http() -> str:
                conn = http.client.HTTPConnection(host, port, timeout=10)
                try:
                    conn.request("POST", "/v1/runs", body=payload, headers=headers)
                    resp = conn.getresponse()
                    body = resp.read()
                finally:
                    conn.close()
                if resp.status != 201:
                    raise RuntimeError(f"submit answered {resp.status}: {body[:300]!r}")
                return str(json.loads(body)["id"])

            def via_fleet() -> str:
                return in_process.submit_run(submit_model)[0].id

            paths: dict[str, Callable[[], str]] = {
                "client": via_client,
                "http": via_http,
                "fleet": via_fleet,
            }
            baseline: list[float] = []
            samples: dict[str, list[Sample]] = {k: [] for k in paths}
            for i in range(warmup + n):
                order = ["baseline", *paths]
                order = order[i % len(order) :] + order[: i % len(order)]  # rotate
                for name in order:
                    time.sleep(0.01)  # let the previous run's ack and result writes settle
                    if name == "baseline":
                        t0 = time.monotonic_ns()
                        noop.apply_async(queue=noop_queue)
                        dt = (starts.next_stamp() - t0) / 1e9
                        if i >= warmup:
                            baseline.append(dt)
                    else:
                        s = measure(store, session, paths[name])
                        if i >= warmup:
                            samples[name].append(s)
        app.close()

    report(n, baseline, samples)


def report(n: int, baseline: list[float], samples: dict[str, list[Sample]]) -> None:
    def ms(x: float) -> str:
        return f"{x * 1e3:.2f} ms"

    q = tail_q(len(baseline))  # p99 from >= 1,000 samples, else p95
    label, b_tail = f"p{q}", percentile(baseline, q)
    b50 = median(baseline)
    print(f"# Dispatch latency, one-way ({n} samples per path, {machine()})\n")
    print(
        f"| path (one-way) | p50 | {label} | p50 / bare | {label} / bare |\n"
        "| --- | ---: | ---: | ---: | ---: |"
    )
    names = {
        "client": "**FleetClient.submit_run** (HTTP, kept-alive) → first snapshot starting",
        "http": "HTTP API, new connection per submit (like curl) → first snapshot starting",
        "fleet": "in-process Fleet.submit_run (no HTTP) → first snapshot starting",
    }
    for key, name in names.items():
        xs = [s.total_s for s in samples[key]]
        p50, pt = median(xs), percentile(xs, q)
        print(f"| {name} | {ms(p50)} | {ms(pt)} | {p50 / b50:.2f}x | {pt / b_tail:.2f}x |")
    print(
        f"| baseline: bare Celery `apply_async()` → no-op task body starts "
        f"| {ms(b50)} | {ms(b_tail)} | 1x | 1x |"
    )

    print("\nWhere the time goes (medians; wall-clock stamps from the run record):\n")
    print(
        "| path | submit returns | → record created | → device reserved "
        "| → claimed on worker | → first snapshot |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for key, name in names.items():
        ss = samples[key]
        cols = [
            median([s.returned_s for s in ss]),
            median([s.to_handler_s for s in ss]),
            median([s.to_reserved_s for s in ss]),
            median([s.to_claimed_s for s in ss]),
            median([s.to_snapshot_s for s in ss]),
        ]
        print(f"| {name.split(' → ')[0]} | " + " | ".join(ms(c) for c in cols) + " |")
    c = [s.total_s for s in samples["client"]]
    r50, rt = median(c) / b50, percentile(c, q) / b_tail
    print(
        f"\nClient path: p50 {r50:.2f}x bare one-way (goal <= 1.5x: "
        f"{'met' if r50 <= 1.5 else 'NOT met'}), {label} {rt:.2f}x bare "
        f"(goal <= 2x: {'met' if rt <= 2 else 'NOT met'}). "
        "Load average at the end: {:.2f} / {:.2f} / {:.2f}.".format(*os.getloadavg())
    )


if __name__ == "__main__":
    main()
