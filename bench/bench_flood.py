"""Head-of-line: how long 20 placeable runs take with and without 1,000 unplaceable runs
queued ahead of them (issue 16 point 3: "the 20 finish as fast as without the flood").

Fleet (all separate processes, `bench/_fleet.py`): its own redis-server, `goalfleet api`,
`goalfleet scheduler`, two sim workers in pool `live` (latency 0.1x) and one in pool `doomed`
that is killed once registered, so its device stays registered but down. Phases alternate in
one run: `clean` (nothing else pending) and `flood` (1,000 runs for pool `doomed` submitted as
one batch first; cancelled afterwards). Each phase submits the 20 runs one by one through the
API and times submit → the last run's end. Reported: median phase time per kind and the ratio
flood ÷ clean (1.0 = no head-of-line cost).

    .venv/bin/python -m bench.bench_flood            # full: 5 phases of each kind
    .venv/bin/python -m bench.bench_flood --quick    # CI: 1 phase each, 5 runs, 200 flood
"""

from __future__ import annotations

import argparse
import os
import signal
import time

from bench._fleet import SIGN_IN, TOKEN, BenchFleet, machine, median
from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import SimWorker
from workers.core.model import RunStatus

LIVE = [SimWorker(f"live-{i}", "ios", "17.5", "iPhone 15", {"pool": "live"}, latency_scale=0.1)
        for i in (1, 2)]  # fmt: skip
DOOMED = SimWorker("doomed-1", "ios", "17.5", "iPhone 15", {"pool": "doomed"})


def phase(api: FleetClient, fleet: BenchFleet, *, runs: int, flood: int) -> float:
    """Seconds from the first submit to the last of `runs` placeable runs ending."""
    store = fleet.store()
    stuck: list[str] = []
    if flood:
        batch = api.submit_batch(
            {**SIGN_IN, "selector": {"labels": {"pool": "doomed"}}, "count": flood}
        )
        record = store.batch(batch.id)
        stuck = list(record.runs) if record is not None else []
    started = time.perf_counter()
    ids = [api.submit_run({**SIGN_IN, "selector": {"labels": {"pool": "live"}}}).id
           for _ in range(runs)]  # fmt: skip
    for rid in ids:
        run = api.wait(rid, poll_s=0.05, timeout_s=600)
        if run.status is not RunStatus.DONE:
            raise RuntimeError(f"run {rid} ended {run.status.value}: {run.reason}")
    took = time.perf_counter() - started
    for rid in stuck:
        store.cancel(rid)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI: one phase each, small sizes")
    args = ap.parse_args()
    reps, runs, flood = (1, 5, 200) if args.quick else (5, 20, 1000)
    with BenchFleet(dispatch_interval_s=1.0) as fleet:
        fleet.start_api()
        fleet.start_scheduler()
        fleet.start_workers([*LIVE, DOOMED])
        os.killpg(fleet.pid(f"worker-{DOOMED.device}"), signal.SIGKILL)
        store = fleet.store()
        while any(d.alive for d in store.registry.devices() if d.info.id == DOOMED.device):
            time.sleep(0.2)
        times: dict[str, list[float]] = {"clean": [], "flood": []}
        with FleetClient(fleet.api_url, token=TOKEN) as api:
            for _ in range(reps):
                times["clean"].append(phase(api, fleet, runs=runs, flood=0))
                times["flood"].append(phase(api, fleet, runs=runs, flood=flood))
    clean, flooded = median(times["clean"]), median(times["flood"])
    print(f"{machine()}; {runs} placeable runs on 2 devices, {flood} unplaceable ahead, "
          f"{reps} phases each (alternating)\n")  # fmt: skip
    print("| phase | median s | all s |")
    print("| --- | --- | --- |")
    for kind, xs in times.items():
        print(f"| {kind} | {median(xs):.2f} | {', '.join(f'{x:.2f}' for x in xs)} |")
    print(f"\nflood ÷ clean: **{flooded / clean:.2f}x**")


if __name__ == "__main__":
    main()
