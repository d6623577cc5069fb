"""What "acknowledged means replicated" costs a submit: `Fleet.submit_run` (the API's submit:
one script writes the run, reserves the idle device and pushes its message) against a real
master with one real replica (`SentinelLab`), with the store waiting for that replica
(`WAIT 1` in the script's pipeline, `GOALFLEET_REDIS_WAIT_REPLICAS=1`) and without (0, the
write acknowledged once the master has it), the two interleaved in rounds in the same run.
Wall time and the calling thread's CPU per submit; medians.

    .venv/bin/python -m bench.bench_replication_wait            # 3,000 submits a side
    .venv/bin/python -m bench.bench_replication_wait --quick    # CI: 100
"""

from __future__ import annotations

import argparse
import time

from bench._fleet import SIGN_IN, TOKEN, machine, median
from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.service.fleet import Fleet
from scheduler.service.requests import RunSubmit
from scheduler.store.enqueue import CeleryEnqueuer
from scheduler.store.runs import FleetStore
from testing.sentinels import SentinelLab
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.celery_app import make_celery
from workers.fleet.connections import store_client
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.settings import Settings
from workers.telemetry.logs import configure_logging

DEVICE = "brw-1"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--samples", type=int, default=None)
    args = ap.parse_args()
    n = args.samples or (100 if args.quick else 3000)
    configure_logging(level="WARNING", fmt="json")
    with SentinelLab(replicas=1, sentinels=0) as lab:
        url = f"redis://{lab.data[0].address}/0"
        keys = Keys("brw")
        sides: dict[str, Fleet] = {}
        for replicas in (0, 1):
            settings = Settings(
                redis_url=url, key_prefix="brw", api_tokens=[TOKEN], redis_wait_replicas=replicas
            )
            store = FleetStore(store_client(settings), keys, retention_s=3600)
            enqueuer = CeleryEnqueuer(make_celery(settings))
            sides[f"WAIT {replicas}"] = Fleet(
                store, Dispatcher(store, enqueuer, view_max_age_s=10), max_pending=0
            )
        r = store_client(Settings(redis_url=url))
        info = DeviceInfo(id=DEVICE, platform=Platform.IOS, os_version="17.5")
        FleetStore(r, keys, retention_s=3600).registry.register(
            info, lease_holder(worker_name(DEVICE)), lease_s=3600
        )
        sub = RunSubmit.model_validate({**SIGN_IN, "device": DEVICE})
        cpu: dict[str, list[float]] = {k: [] for k in sides}
        wall: dict[str, list[float]] = {k: [] for k in sides}
        rounds, per_round = 10, max(1, n // 10)
        for rnd in range(rounds + 1):  # round 0 warms up
            for name, fleet in sides.items():
                for _ in range(per_round):
                    r.hset(keys.device(DEVICE), "run", "")
                    r.delete(keys.queue(DEVICE))
                    c0, w0 = time.thread_time(), time.perf_counter()
                    fleet.submit_run(sub)
                    c1, w1 = time.thread_time(), time.perf_counter()
                    if rnd:
                        cpu[name].append((c1 - c0) * 1e6)
                        wall[name].append((w1 - w0) * 1e6)
    base, waited = median(wall["WAIT 0"]), median(wall["WAIT 1"])
    print(f"# A submit with and without the replication wait ({n} a side, {machine()})\n")
    print("| store | wall p50 | CPU p50 |\n| --- | ---: | ---: |")
    for name in sides:
        print(f"| {name} | {median(wall[name]):.0f} µs | {median(cpu[name]):.0f} µs |")
    print(f"\nadded by the wait: {waited - base:+.0f} µs a submit ({waited / base:.2f}x)")


if __name__ == "__main__":
    main()
