"""A submit to an idle farm: choosing the idle device for a selector run at N idle devices.

The submit's fast path picks the least loaded idle device its selector matches from the API's
cached device view (`DeviceView.pick_idle`: the idle devices kept in load order, the first
match wins) and reserves it in the submit's one script. Before, it listed every idle device,
matched each and took the minimum (`routing.choose` over `view.idle()`): O(idle) per submit,
which at 10,000 idle devices is most of a submit. Both are timed here in the same run, on the
same view; then whole submits (`Fleet.submit_run`, real Redis, each reserving one device).

Per N (10, 100, 1,000, 10,000 idle iOS devices in a private redis-server; every 100th also
carries the label `pool=rare`):

- **pick, broad**: `{"platform": "ios"}` (every device matches) — now vs before;
- **pick, narrow**: `{"labels": {"pool": "rare"}}` (1 % match: the walk goes past 99 devices
  before its first match) — now vs before;
- **submit**: `Fleet.submit_run` of a broad selector run, p50 / p95, and its Redis commands.

    .venv/bin/python -m bench.bench_idle_pick            # N up to 10,000; 300 samples
    .venv/bin/python -m bench.bench_idle_pick --quick    # CI: N = 10 and 100, 30 samples

The code before `pick_idle` (19b722f) runs this file too (its "now" columns stay empty):
`git worktree add /tmp/before 19b722f && cp bench/bench_idle_pick.py /tmp/before/bench/ &&
cd /tmp/before && PYTHONPATH=. /path/to/.venv/bin/python -m bench.bench_idle_pick`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench._fleet import machine, median, pct
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.dispatch.routing import choose
from scheduler.local.redis import LocalRedis
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import Platform
from workers.core.records import DeviceInfo, Selector
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys, lease_holder, worker_name

BROAD = Selector(platform=Platform.IOS)
NARROW = Selector(labels={"pool": "rare"})


def timed_us(fn: Callable[[], object], samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def measure(n: int, samples: int) -> dict[str, float]:
    with LocalRedis().start() as server:
        r = redis_client(server.url)
        store = FleetStore(r, Keys("bp"), retention_s=3600)
        for i in range(n):
            did = f"d{i:05}"
            labels = {"pool": "rare"} if i % 100 == 99 else {}
            info = DeviceInfo(id=did, platform=Platform.IOS, os_version="17.5", labels=labels)
            store.registry.register(info, lease_holder(worker_name(did)), lease_s=3600)
        fleet = Fleet(
            store,
            Dispatcher(store, RecordingEnqueuer(r, Keys("bp")), view_max_age_s=3600),
            max_pending=10**7,
        )
        view = fleet.dispatcher.view
        view.reload()
        row: dict[str, float] = {}
        pick = getattr(view, "pick_idle", None)  # absent in the code before it (copied back)
        for name, sel in (("broad", BROAD), ("narrow", NARROW)):
            if n < 100 and sel is NARROW:  # no rare device below 100
                continue
            if pick is not None:
                row[f"{name}_now"] = median(timed_us(lambda s=sel: pick(s), samples))
            row[f"{name}_before"] = median(
                timed_us(lambda s=sel: choose(view.idle(), None, s), samples)
            )
        cmds0 = int(r.info("stats")["total_commands_processed"])
        sub = timed_us(lambda: fleet.submit_run(RunSubmit(goal="g", selector=BROAD)), samples)
        row["cmds"] = (int(r.info("stats")["total_commands_processed"]) - cmds0 - 1) / samples
        row["submit_p50"], row["submit_p95"] = median(sub) / 1000, pct(sub, 0.95) / 1000
        r.close()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI: N = 10 and 100, 30 samples")
    args = ap.parse_args()
    sizes, samples = ((10, 100), 30) if args.quick else ((10, 100, 1000, 10_000), 300)
    print(f"{machine()}; {samples} samples per figure; every device idle at the start\n")
    print(
        "| N idle devices | pick broad now µs | before µs | pick narrow now µs | before µs "
        "| submit p50 ms | p95 ms | Redis cmds/submit |"
    )
    print("| --- " * 8 + "|")
    for n in sizes:
        x = measure(n, samples)
        cells = " | ".join(
            f"{x[k]:,.1f}" if k in x else "—"
            for k in ("broad_now", "broad_before", "narrow_now", "narrow_before")
        )
        print(
            f"| {n:,} | {cells} | {x['submit_p50']:.2f} | {x['submit_p95']:.2f} | {x['cmds']:.0f} |"
        )


if __name__ == "__main__":
    main()
