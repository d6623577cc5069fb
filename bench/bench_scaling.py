"""Fleet scaling: 1, 4, 8 and 16 sim devices, one real worker process each, realistic latencies.

Fleet (all separate processes, `bench/_fleet.py`): its own redis-server, `goalfleet api`,
`goalfleet scheduler`, and 16 `goalfleet worker`s on sim devices at `latency_scale=1.0`
(snapshot ~100 ms, press + settle ~650 ms, fill + settle ~750 ms, ±15 % jitter), deciding with
the bench-only `bench/rules-650` decider (the rules decider after a 650 ms sleep: a model's
think time, no model server on the same two cores). All 16 workers run through every phase;
each phase routes its batch to the first N devices by label, so the idle workers' own upkeep
(heartbeats, broker polling, events) is paid in every phase.

Per phase: one batch of `runs_per_device * N` sign-in runs (`count`, selector) through the
API, all queued at once; then from the run records and their step tables:

- **utilisation** of a device = time inside its steps (snapshot + decide + action, from the
  step rows) ÷ the time work was queued for it: from the submit until its last run ended, or
  until the last run left the queue if that was later (an idle device while work waits
  counts against it);
- **runs/s per device** = runs ÷ (last finish - submit) ÷ N; **scaling efficiency** = that ÷
  the same at N = 1 (the baseline, measured in the same run);
- the gap between one run's end and the next run's claim on the same device (finish → wake →
  scheduler → broker → worker → claim: the fleet's own cost per run), the CPU the fleet's
  processes used (share of all cores) and the whole machine's CPU (other work included).

    .venv/bin/python -m bench.bench_scaling            # full: 10 runs per device per phase
    .venv/bin/python -m bench.bench_scaling --quick    # CI: 1 and 2 devices, 0.1x latencies
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from dataclasses import dataclass

from bench._fleet import SIGN_IN, TOKEN, BenchFleet, cpu_jiffies, machine, median, tail
from scheduler.client import FleetClient
from scheduler.local.fleet import SimWorker
from workers.core.model import RunStatus
from workers.core.records import RunRecord


@dataclass(frozen=True)
class Phase:
    devices: int
    runs: int
    wall_s: float
    utilisation: float
    utilisation_min: float
    in_runs: float
    runs_per_s_per_device: float
    step_s: float
    """median time per step (snapshot + decide + action)."""
    gap_p50_s: float
    gap_tail: tuple[str, float]
    """("p99" or "p95", seconds): p99 only from >= 1,000 gaps."""
    first_claim_s: float
    cpu_busy: float
    """the whole machine's CPU busy share (every process on it, not only this fleet's)."""
    fleet_cpu: float
    """this fleet's processes' CPU time ÷ (wall x cores)."""


def analyse(n: int, t0: float, runs: list[RunRecord], cpu_busy: float, fleet_cpu_s: float) -> Phase:
    bad = [r for r in runs if r.status is not RunStatus.DONE]
    if bad:
        raise RuntimeError(
            f"{len(bad)} runs did not end done, e.g. {bad[0].status}: {bad[0].reason}"
        )
    t_empty = max(r.dispatched_at or t0 for r in runs)
    t_end = max(r.finished_at or t0 for r in runs)
    by_device: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_device.setdefault(r.device or "?", []).append(r)
    steps_s, windows, in_runs, gaps, step_times = [], [], [], [], []
    for device_runs in by_device.values():
        device_runs.sort(key=lambda r: r.started_at or 0.0)
        busy = 0.0
        for r in device_runs:
            assert r.result is not None  # noqa: S101 - done runs carry results
            for s in r.result.steps:
                step = (s.snapshot_ms + s.decide_ms + s.action_ms) / 1000
                busy += step
                step_times.append(step)
        steps_s.append(busy)
        last = max(r.finished_at or t0 for r in device_runs)
        windows.append(max(last, t_empty) - t0)
        in_runs.append(sum((r.finished_at or 0) - (r.started_at or 0) for r in device_runs))
        gaps += [
            (b.started_at or 0) - (a.finished_at or 0) for a, b in itertools.pairwise(device_runs)
        ]
    idle_devices = n - len(by_device)  # a device that got no run was idle all along
    windows += [t_end - t0] * idle_devices
    steps_s += [0.0] * idle_devices
    return Phase(
        devices=n,
        runs=len(runs),
        wall_s=t_end - t0,
        utilisation=sum(steps_s) / sum(windows),
        utilisation_min=min(b / w for b, w in zip(steps_s, windows, strict=True)),
        in_runs=sum(in_runs) / sum(windows),
        runs_per_s_per_device=len(runs) / (t_end - t0) / n,
        step_s=median(step_times),
        gap_p50_s=median(gaps) if gaps else 0.0,
        gap_tail=tail(gaps) if gaps else ("p95", 0.0),
        first_claim_s=min(r.started_at or t_end for r in runs) - t0,
        cpu_busy=cpu_busy,
        fleet_cpu=fleet_cpu_s / (t_end - t0) / (os.cpu_count() or 1),
    )


def run_phase(  # noqa: PLR0917 - one phase's parameters
    fleet: BenchFleet, client: FleetClient, n: int, runs: int, decider: str, timeout_s: float
) -> Phase:
    body = {**SIGN_IN, "decider": decider, "selector": {"labels": {f"n{n}": "y"}}, "count": runs}
    busy0, total0 = cpu_jiffies()
    fleet0 = fleet.cpu_s()
    t0 = time.time()
    batch = client.submit_batch(body)
    client.wait_batch(batch.id, poll_s=0.5, timeout_s=timeout_s)
    busy1, total1 = cpu_jiffies()
    fleet1 = fleet.cpu_s()
    records = client.batch_runs(batch.id)
    return analyse(n, t0, records, (busy1 - busy0) / max(1, total1 - total0), fleet1 - fleet0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs-per-device", type=int, default=None)
    args = ap.parse_args()
    sizes = [1, 2] if args.quick else [1, 4, 8, 16]
    per_device = args.runs_per_device or (2 if args.quick else 10)
    scale = 0.1 if args.quick else 1.0
    decider = f"bench/rules-{650 * scale:g}"
    top = max(sizes)
    workers = [
        SimWorker(
            f"d{i + 1:02d}",
            latency_scale=scale,
            labels={f"n{s}": "y" for s in sizes if i < s},
        )
        for i in range(top)
    ]
    phases: list[Phase] = []
    start = time.monotonic()
    with BenchFleet() as fleet:
        fleet.start_api()
        fleet.start_scheduler()
        fleet.start_workers(workers)
        started_s = time.monotonic() - start
        with FleetClient(fleet.api_url, token=TOKEN) as client:
            # warm-up: one quick run on every device (pool children import on their first run)
            warm = client.submit_batch({**SIGN_IN, "selector": {"labels": {f"n{top}": "y"}}})
            client.wait_batch(warm.id, poll_s=0.2, timeout_s=120)
            for n in sizes:
                timeout = 120 + per_device * 60 * scale
                phases.append(run_phase(fleet, client, n, per_device * n, decider, timeout))
        load = os.getloadavg()
    report(phases, per_device, scale, decider, started_s, load)


def report(  # noqa: PLR0917 - the figures and how they were made
    phases: list[Phase],
    per_device: int,
    scale: float,
    decider: str,
    started_s: float,
    load: tuple[float, float, float],
) -> None:
    base = phases[0].runs_per_s_per_device
    total = sum(p.runs for p in phases)
    print(
        f"# Fleet scaling ({total} sign-in runs, {per_device} per device per phase, "
        f"latency_scale={scale:g}, decider {decider}; {machine()})\n"
    )
    print(
        "| devices | runs | wall | utilisation (in steps) | worst device | in runs "
        "| runs/s per device | efficiency vs 1 | step p50 | gap between runs p50 / tail "
        "| submit → first claim | fleet CPU (of 2 cores) | machine CPU busy |"
    )
    print("| --- " + "| ---: " * 12 + "|")
    for p in phases:
        print(
            f"| {p.devices} | {p.runs} | {p.wall_s:.1f} s | **{p.utilisation:.1%}** "
            f"| {p.utilisation_min:.1%} | {p.in_runs:.1%} | {p.runs_per_s_per_device:.4f} "
            f"| **{p.runs_per_s_per_device / base:.3f}** | {p.step_s * 1e3:.0f} ms "
            f"| {p.gap_p50_s * 1e3:.1f} / {p.gap_tail[1] * 1e3:.1f} ms ({p.gap_tail[0]}) "
            f"| {p.first_claim_s * 1e3:.0f} ms | {p.fleet_cpu:.0%} | {p.cpu_busy:.0%} |"
        )
    last = phases[-1]
    eff = last.runs_per_s_per_device / base
    print(
        f"\n{last.devices} devices: utilisation {last.utilisation:.1%} (goal >= 95 %: "
        f"{'met' if last.utilisation >= 0.95 else 'NOT met'}), efficiency {eff:.3f} "
        f"(goal >= 0.9: {'met' if eff >= 0.9 else 'NOT met'}). "
        f"{last.devices} workers came up in {started_s:.0f} s; "
        f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}."
    )


if __name__ == "__main__":
    main()
