"""Memory: resident size of one idle worker (main process + pool child) and of the API, and
their growth over 1,000 runs.

Fleet (all separate processes, `bench/_fleet.py`): its own redis-server, `goalfleet api`,
`goalfleet scheduler`, one `goalfleet worker` on a zero-latency sim device, and — the
baseline, measured in the same run — a bare Celery worker made from the same settings and
flags (prefork, one child) serving a no-op task, given as many no-op tasks as the worker gets
runs.

Read from /proc: RSS (`VmRSS`) and PSS (`smaps_rollup`; pages the pool child still shares
copy-on-write with its parent are split between them, so PSS adds up to what the pair really
costs, while the RSS sum counts shared pages twice). Samples: idle right after start, idle
after the first run (the pool child imports the loop, the decider and the device on its first
run), then after every 100 runs (sign-in runs, submitted through the API in batches of 100 and
waited for, so each sample is of an idle worker). Slope: least squares over the samples after
the first run. The worker's pool child is replaced after `worker_max_tasks_per_child` (1,000)
tasks; the table shows the child's pid so a replacement is visible.

    .venv/bin/python -m bench.bench_memory            # full: 1,000 runs, a sample every 100
    .venv/bin/python -m bench.bench_memory --runs 3000  # longer: does a trend level off?
    .venv/bin/python -m bench.bench_memory --quick    # CI: 100 runs, a sample every 25
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from bench._fleet import (
    SIGN_IN,
    TOKEN,
    BenchFleet,
    children,
    machine,
    pss_kib,
    rss_kib,
)
from bench._worker import NOOP_DEVICE, NOOP_TASK
from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import SimWorker
from workers.core.model import RunStatus
from workers.fleet.celery_app import make_celery
from workers.fleet.keys import device_queue

DEVICE = "d1"


@dataclass(frozen=True)
class Sample:
    runs: int
    worker_main: int
    worker_child: int
    worker_pss: int
    child_pid: int
    api: int
    scheduler: int
    bare_main: int
    bare_child: int
    bare_pss: int
    """KiB each."""

    @property
    def worker_rss(self) -> int:
        return self.worker_main + self.worker_child

    @property
    def bare_rss(self) -> int:
        return self.bare_main + self.bare_child


def pool_child(pid: int, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kids = children(pid)
        if kids:
            return kids[-1]
        time.sleep(0.1)
    raise RuntimeError(f"worker {pid} has no pool child")


def sample(fleet: BenchFleet, runs: int) -> Sample:
    time.sleep(1.0)  # let the last run's acks, result and event writes finish
    main, bare = fleet.pid(f"worker-{DEVICE}"), fleet.pid("noop")
    child, bare_child = pool_child(main), pool_child(bare)
    return Sample(
        runs=runs,
        worker_main=rss_kib(main),
        worker_child=rss_kib(child),
        worker_pss=pss_kib(main) + pss_kib(child),
        child_pid=child,
        api=rss_kib(fleet.pid("api")),
        scheduler=rss_kib(fleet.pid("scheduler")),
        bare_main=rss_kib(bare),
        bare_child=rss_kib(bare_child),
        bare_pss=pss_kib(bare) + pss_kib(bare_child),
    )


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares KiB per 100 runs."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return 100 * sxy / sxx if sxx else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None, help="runs after the first (default 1000)")
    args = ap.parse_args()
    total, every = (100, 25) if args.quick else (args.runs or 1000, 100)
    samples: list[Sample] = []
    body = {**SIGN_IN, "selector": {"platform": "ios"}}
    with BenchFleet() as fleet:
        fleet.start_api()
        fleet.start_scheduler()
        fleet.start_noop_worker()
        fleet.start_workers([SimWorker(DEVICE)])
        idle = sample(fleet, 0)
        app = make_celery(fleet.require_settings())

        def noop_body() -> None:
            return None

        noop = app.task(name=NOOP_TASK, ignore_result=False)(noop_body)
        queue = device_queue(NOOP_DEVICE)
        with FleetClient(fleet.api_url, token=TOKEN) as client:
            noop.apply_async(queue=queue).get(timeout=30)
            first = client.submit_run(body)
            if client.wait(first.id, poll_s=0.05, timeout_s=60).status is not RunStatus.DONE:
                raise RuntimeError("the first run did not end done")
            samples.append(sample(fleet, 1))
            done = 1
            t0 = time.monotonic()
            while done < total + 1:
                batch = client.submit_batch({**body, "count": every})
                finished = client.wait_batch(batch.id, poll_s=0.2, timeout_s=600)
                if finished.counts.get("done", 0) != every:
                    raise RuntimeError(f"batch ended {finished.counts}")
                for _ in range(every):  # the baseline does as many tasks
                    noop.apply_async(queue=queue).get(timeout=30)
                done += every
                samples.append(sample(fleet, done))
            elapsed = time.monotonic() - t0
        app.close()
    report(idle, samples, total, elapsed)


def report(idle: Sample, samples: list[Sample], total: int, elapsed_s: float) -> None:
    def mib(kib: float) -> str:
        return f"{kib / 1024:.1f} MiB"

    print(f"# Memory ({total} runs after the first, {machine()})\n")
    print("| process | RSS idle (fresh) | RSS idle (after 1st run) | PSS after 1st run |")
    print("| --- | ---: | ---: | ---: |")
    w = samples[0]
    rows = [
        ("worker main", idle.worker_main, w.worker_main, None),
        ("worker pool child", idle.worker_child, w.worker_child, None),
        ("**worker, both processes**", idle.worker_rss, w.worker_rss, w.worker_pss),
        ("baseline: bare Celery worker, both", idle.bare_rss, w.bare_rss, w.bare_pss),
        ("API (`goalfleet api`)", idle.api, w.api, None),
        ("scheduler (`goalfleet scheduler`)", idle.scheduler, w.scheduler, None),
    ]
    for name, a, b, c in rows:
        print(f"| {name} | {mib(a)} | {mib(b)} | {mib(c) if c is not None else '—'} |")
    print(
        "\nWorker / bare Celery worker (RSS after the first run): "
        f"{w.worker_rss / w.bare_rss:.2f}x; "
        f"PSS {w.worker_pss / w.bare_pss:.2f}x.\n"
    )
    print(
        "| runs | worker RSS (main + child) | main | child | child pid | worker PSS "
        "| API RSS | scheduler RSS | bare Celery worker RSS (main) |"
    )
    print("| --- " + "| ---: " * 8 + "|")
    for s in samples:
        print(
            f"| {s.runs} | {mib(s.worker_rss)} | {mib(s.worker_main)} | {mib(s.worker_child)} "
            f"| {s.child_pid} | {mib(s.worker_pss)} | {mib(s.api)} | {mib(s.scheduler)} "
            f"| {mib(s.bare_rss)} ({mib(s.bare_main)}) |"
        )
    grow = samples[1:] or samples
    ws = slope([(s.runs, s.worker_rss) for s in grow])
    wm = slope([(s.runs, s.worker_main) for s in grow])
    ps = slope([(s.runs, s.worker_pss) for s in grow])
    api = slope([(s.runs, s.api) for s in grow])
    sch = slope([(s.runs, s.scheduler) for s in grow])
    bare = slope([(s.runs, s.bare_rss) for s in grow])
    bare_main = slope([(s.runs, s.bare_main) for s in grow])
    peak = max(s.worker_rss for s in samples)
    print(
        f"\nSlope per 100 runs (least squares from run {grow[0].runs}): worker RSS "
        f"{ws:+.0f} KiB (main process {wm:+.0f} KiB), worker PSS {ps:+.0f} KiB, "
        f"API {api:+.0f} KiB, scheduler {sch:+.0f} KiB, "
        f"bare Celery worker (as many no-op tasks) {bare:+.0f} KiB "
        f"(main process {bare_main:+.0f} KiB). Worker peak RSS {mib(peak)} "
        f"(goal <= 200 MB: {'met' if peak <= 200 * 1e6 / 1024 else 'NOT met'}). "
        f"{total} runs took {elapsed_s:.0f} s."
    )


if __name__ == "__main__":
    main()
