"""Fleet scaling: N sim devices, one real worker process each, realistic latencies, N growing
until a limit of the machine stops it.

Fleet (all separate processes, `bench/_fleet.py`): its own redis-server, `goalfleet api`,
`goalfleet scheduler`, and one `goalfleet worker` per device (Celery prefork, one pool child)
on sim devices at `latency_scale=1.0` (snapshot ~100 ms, press + settle ~650 ms, fill + settle
~750 ms, ±15 % jitter), deciding with the bench-only `bench/rules-650` decider (the rules
decider after a 650 ms sleep: a model's think time, no model server on the same two cores).
Runs are sent with `"memory": false`: every step asks the decider (the decision memory would
answer repeated screens without the think time).

The fleet grows: before the phase with N devices the workers it lacks are started, in
parallel batches of `START_BATCH`, and each new one does one warm-up run (its pool child
imports the loop on its first run); the workers of earlier phases keep running. So the phase
with N devices has exactly N workers, all of them busy. Per phase: `runs_per_device * N`
sign-in runs (`count`, a label selector for the first N devices; batches of at most 1,000)
through the API, all queued at once; then from the run records and their step tables:

- **utilisation** of a device = time inside its steps (snapshot + decide + action, from the
  step rows) ÷ the time work was queued for it: from the submit until its last run ended, or
  until the last run left the queue if that was later (an idle device while work waits
  counts against it);
- **runs/s per device** = runs ÷ (last finish - submit) ÷ N; **scaling efficiency** = that ÷
  the same in the first phase (N = 1, measured in the same run);
- the gap between one run's end and the next run's claim on the same device (finish → wake →
  scheduler → broker → worker → claim: the fleet's own cost per run), the CPU the fleet's
  processes used (share of all cores) and the whole machine's CPU (other work included);
- memory after the phase, from /proc: per worker the RSS of the worker and its pool child
  summed (shared copy-on-write pages counted twice) and their PSS (shared pages split: what
  the pair really costs), the fleet's PSS in all, and the machine's `MemAvailable`.

Stop rule: after a phase, N stops growing when its efficiency is below `--min-efficiency`
(0.9), the machine's CPU was >= `--max-cpu` (95 %) busy during it with the fleet using at
least half of that (the machine is shared: saturation by other work is reported, and N keeps
growing; if it costs the fleet throughput the efficiency rule stops it), or `MemAvailable` is
below `--mem-margin-gib` (4 GiB); before a phase, when the workers it needs would take
`MemAvailable` below that margin (at the PSS measured so far), when starting a worker fails
(it exits, or does not register within 240 s), or when the phase would end past
`--budget-min` (25 min; estimated from the last phase). The report names the limit.

    .venv/bin/python -m bench.bench_scaling            # full: N = 1, 4, 8, 16 (10 runs per
                                                       # device), then 32 ... 256 (5 per device)
    .venv/bin/python -m bench.bench_scaling --devices 1,16,32,64,96
    .venv/bin/python -m bench.bench_scaling --quick    # CI: 1 and 2 devices, 0.1x latencies
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench._fleet import SIGN_IN, TOKEN, BenchFleet, cpu_jiffies, machine, median, tail
from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import SimWorker
from scheduler.service.requests import MAX_BATCH
from workers.core.model import RunStatus
from workers.core.records import RunRecord

FULL_SIZES = (1, 4, 8, 16, 32, 64, 96, 128, 160, 192, 256)
QUICK_SIZES = (1, 2)
SMALL = 16
"""Phases up to this N run `--runs-per-device` (10) runs per device, larger ones
`--large-runs-per-device` (5): the full run must fit its time budget."""
START_BATCH = 16
"""Workers spawned at once; the next batch starts once these registered."""
GIB = 1024 * 1024  # KiB
GUESS_PSS_KIB = 150 * 1024
"""The memory check before the first measurement: a generous guess of one worker's PSS."""


# -- /proc, read in one pass (a few hundred processes: one scan, not one per process) ---------


@dataclass(frozen=True)
class Proc:
    ppid: int
    cpu_ticks: int
    """utime + stime + cutime + cstime (reaped children included)."""


def proc_table() -> dict[int, Proc]:
    table: dict[int, Proc] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            ticks = sum(int(x) for x in fields[11:15])
            table[int(entry.name)] = Proc(ppid=int(fields[1]), cpu_ticks=ticks)
    return table


def with_descendants(roots: Iterable[int], table: dict[int, Proc]) -> set[int]:
    kids: dict[int, list[int]] = {}
    for pid, p in table.items():
        kids.setdefault(p.ppid, []).append(pid)
    found: set[int] = set()
    todo = [r for r in roots if r in table]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += kids.get(pid, [])
    return found


ROLES = ("workers", "scheduler", "api", "redis")


def fleet_roots(fleet: BenchFleet) -> dict[str, list[int]]:
    """The fleet's process-group leaders by role (each with its children, `with_descendants`)."""
    roots: dict[str, list[int]] = {role: [] for role in ROLES}
    for name, child in fleet.procs.items():
        roots.setdefault("workers" if name.startswith("worker-") else name, []).append(child.pid)
    if fleet.redis.child is not None:
        roots["redis"].append(fleet.redis.child.pid)
    return roots


def fleet_cpu_s(fleet: BenchFleet) -> dict[str, float]:
    """CPU seconds used so far by the fleet's processes and their children, by role."""
    table = proc_table()
    tick = os.sysconf("SC_CLK_TCK")
    return {
        role: sum(table[p].cpu_ticks for p in with_descendants(pids, table)) / tick
        for role, pids in fleet_roots(fleet).items()
    }


def field_kib(path: str, key: str) -> int:
    """The KiB figure on the line starting with `key` of a /proc file (0 if it is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def mem_available_kib() -> int:
    return field_kib("/proc/meminfo", "MemAvailable:")


@dataclass(frozen=True)
class Memory:
    rss_kib: float
    """mean per worker: worker + pool child (+ any other descendant), shared pages twice."""
    pss_kib: float
    """mean per worker, shared pages split between their sharers."""
    fleet_pss_kib: int
    """every fleet process (redis, API, scheduler, workers)."""
    available_kib: int


def measure_memory(fleet: BenchFleet) -> Memory:
    table = proc_table()
    rss, pss = [], []
    for name, child in fleet.procs.items():
        if name.startswith("worker-"):
            group = with_descendants([child.pid], table)
            rss.append(sum(field_kib(f"/proc/{p}/status", "VmRSS:") for p in group))
            pss.append(sum(field_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in group))
    every = with_descendants(itertools.chain(*fleet_roots(fleet).values()), table)
    return Memory(
        rss_kib=sum(rss) / max(1, len(rss)),
        pss_kib=sum(pss) / max(1, len(pss)),
        fleet_pss_kib=sum(field_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in every),
        available_kib=mem_available_kib(),
    )


# -- one phase -------------------------------------------------------------------------------


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
    cpu_roles: dict[str, float]
    """the same by role: workers (with pool children), scheduler, api, redis."""
    started: int = 0
    """workers started for this phase (the others ran in earlier phases)."""
    start_s: float = 0.0
    """spawn of the first → registration of the last of them."""
    memory: Memory | None = None
    load1: float = 0.0
    """1-minute load average at the phase's end."""


def analyse(
    n: int, t0: float, runs: list[RunRecord], cpu_busy: float, fleet_cpu_s: dict[str, float]
) -> Phase:
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
        fleet_cpu=sum(fleet_cpu_s.values()) / (t_end - t0) / (os.cpu_count() or 1),
        cpu_roles={
            role: cpu / (t_end - t0) / (os.cpu_count() or 1) for role, cpu in fleet_cpu_s.items()
        },
    )


def run_phase(  # noqa: PLR0917 - one phase's parameters
    fleet: BenchFleet, client: FleetClient, n: int, runs: int, decider: str, timeout_s: float
) -> Phase:
    body = {
        **SIGN_IN,
        "decider": decider,
        "memory": False,  # every step pays the decider's think time, none is remembered
        "selector": {"labels": {f"n{n}": "y"}},
    }
    fleet0 = fleet_cpu_s(fleet)
    busy0, total0 = cpu_jiffies()
    t0 = time.time()
    batches = [  # the API takes at most MAX_BATCH runs a batch
        client.submit_batch({**body, "count": min(MAX_BATCH, runs - first)})
        for first in range(0, runs, MAX_BATCH)
    ]
    for batch in batches:
        client.wait_batch(batch.id, poll_s=0.5, timeout_s=timeout_s)
    busy1, total1 = cpu_jiffies()
    fleet1 = fleet_cpu_s(fleet)
    records = [r for batch in batches for r in client.batch_runs(batch.id)]
    used = {role: fleet1[role] - fleet0[role] for role in ROLES}
    return analyse(n, t0, records, (busy1 - busy0) / max(1, total1 - total0), used)


# -- growing the fleet -----------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    min_efficiency: float
    max_cpu: float
    mem_margin_kib: int
    budget_s: float


def worker(i: int, sizes: Sequence[int], scale: float) -> SimWorker:
    """Device i (0-based): labelled `n<s>` for every phase size s it serves, and `new<s>` for
    the phase before which it is started (its warm-up run's selector)."""
    first = min(s for s in sizes if i < s)
    labels = {f"n{s}": "y" for s in sizes if i < s} | {f"new{first}": "y"}
    return SimWorker(f"d{i + 1:02d}", latency_scale=scale, labels=labels)


def grow(fleet: BenchFleet, client: FleetClient, workers: Sequence[SimWorker], n: int) -> float:
    """Start `workers` in batches, warm each up with one run; seconds spawn → registered."""
    t = time.monotonic()
    for first in range(0, len(workers), START_BATCH):
        fleet.start_workers(workers[first : first + START_BATCH])
    took = time.monotonic() - t
    warm = client.submit_batch({**SIGN_IN, "selector": {"labels": {f"new{n}": "y"}}})
    client.wait_batch(warm.id, poll_s=0.2, timeout_s=120 + 2 * len(workers))
    return took


def cpu_saturated(p: Phase, limits: Limits) -> bool:
    return p.cpu_busy >= limits.max_cpu


def limit_after(p: Phase, base: Phase, limits: Limits) -> str | None:
    eff = p.runs_per_s_per_device / base.runs_per_s_per_device
    if eff < limits.min_efficiency:
        return f"efficiency {eff:.3f} < {limits.min_efficiency:g}"
    if cpu_saturated(p, limits) and p.fleet_cpu >= p.cpu_busy / 2:
        return (
            f"CPU: the machine {p.cpu_busy:.0%} busy (>= {limits.max_cpu:.0%}), "
            f"the fleet's own share {p.fleet_cpu:.0%}"
        )
    if p.memory is not None and p.memory.available_kib < limits.mem_margin_kib:
        return (
            f"MemAvailable {p.memory.available_kib / GIB:.1f} GiB < "
            f"{limits.mem_margin_kib / GIB:g} GiB margin"
        )
    return None


def limit_before(  # noqa: PLR0917 - the step ahead and what is known so far
    n: int, have: int, phases: Sequence[Phase], runs: int, elapsed_s: float, limits: Limits
) -> str | None:
    last = phases[-1] if phases else None
    per_worker = last.memory.pss_kib if last and last.memory else GUESS_PSS_KIB
    after = mem_available_kib() - (n - have) * per_worker
    if after < limits.mem_margin_kib:
        return (
            f"memory: {n - have} more workers at {per_worker / 1024:.0f} MiB PSS would leave "
            f"{after / GIB:.1f} GiB available (< {limits.mem_margin_kib / GIB:g} GiB margin)"
        )
    if last is not None and limits.budget_s > 0:
        start_each = max((p.start_s / p.started for p in phases if p.started), default=1.0)
        wall = last.wall_s * last.devices / last.runs * runs  # the last phase's time per run
        est = (n - have) * (start_each + 0.5) + wall + 30  # + warm-up, stop and slack
        if elapsed_s + est > limits.budget_s:
            return (
                f"time budget: N = {n} would end at ~{(elapsed_s + est) / 60:.0f} min "
                f"(> {limits.budget_s / 60:g} min)"
            )
    return None


@dataclass(frozen=True)
class Plan:
    sizes: Sequence[int]
    runs_per_device: tuple[int, int]
    """(for N <= SMALL, for N > SMALL)."""
    scale: float
    decider: str
    limits: Limits

    def per_device(self, n: int) -> int:
        return self.runs_per_device[0] if n <= SMALL else self.runs_per_device[1]


def scale_up(fleet: BenchFleet, client: FleetClient, plan: Plan) -> tuple[list[Phase], str | None]:
    """Grow the fleet phase by phase until the sizes run out or a limit is hit (named)."""
    phases: list[Phase] = []
    start = time.monotonic()
    have = 0
    for n in plan.sizes:
        per_device = plan.per_device(n)
        stop = limit_before(n, have, phases, per_device, time.monotonic() - start, plan.limits)
        if stop:
            return phases, stop
        new = [worker(i, plan.sizes, plan.scale) for i in range(have, n)]
        try:
            start_s = grow(fleet, client, new, n)
        except (RuntimeError, TimeoutError) as e:
            return phases, f"starting workers {have + 1}-{n} failed: {str(e).splitlines()[0]}"
        have = n
        timeout = 120 + per_device * 60 * plan.scale * 2
        try:
            p = run_phase(fleet, client, n, per_device * n, plan.decider, timeout)
        except (RuntimeError, TimeoutError) as e:
            return phases, f"the phase with N = {n} failed: {str(e).splitlines()[0]}"
        memory = measure_memory(fleet)
        load1 = os.getloadavg()[0]
        p = replace(p, started=len(new), start_s=start_s, memory=memory, load1=load1)
        phases.append(p)
        stop = limit_after(p, phases[0], plan.limits)
        if stop:
            return phases, stop
    return phases, None


def parse_sizes(text: str) -> list[int]:
    sizes = sorted({int(x) for x in text.split(",") if x.strip()})
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("--devices: a comma-separated list of counts >= 1")
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--devices", type=parse_sizes, default=None, help="e.g. 1,16,32,64,96")
    ap.add_argument("--runs-per-device", type=int, default=None, help=f"phases N <= {SMALL}")
    ap.add_argument("--large-runs-per-device", type=int, default=5, help=f"phases N > {SMALL}")
    ap.add_argument("--min-efficiency", type=float, default=0.9)
    ap.add_argument("--max-cpu", type=float, default=0.95, help="machine CPU busy share")
    ap.add_argument("--mem-margin-gib", type=float, default=4.0)
    ap.add_argument("--budget-min", type=float, default=25.0, help="0: no time budget")
    args = ap.parse_args()
    sizes = args.devices or list(QUICK_SIZES if args.quick else FULL_SIZES)
    small = args.runs_per_device or (2 if args.quick else 10)
    large = args.runs_per_device or args.large_runs_per_device
    scale = 0.1 if args.quick else 1.0
    decider = f"bench/rules-{650 * scale:g}"
    limits = Limits(
        min_efficiency=args.min_efficiency,
        max_cpu=args.max_cpu,
        mem_margin_kib=int(args.mem_margin_gib * GIB),
        budget_s=args.budget_min * 60,
    )
    start = time.monotonic()
    mem0 = mem_available_kib()
    with BenchFleet() as fleet:
        fleet.start_api()
        fleet.start_scheduler()
        with FleetClient(fleet.api_url, token=TOKEN) as client:
            plan = Plan(sizes, (small, large), scale, decider, limits)
            phases, stop = scale_up(fleet, client, plan)
        load = os.getloadavg()
    report(phases, plan, stop, load, mem0, time.monotonic() - start)


def report(  # noqa: PLR0917 - the figures and how they were made
    phases: list[Phase],
    plan: Plan,
    stop: str | None,
    load: tuple[float, float, float],
    mem0_kib: int,
    elapsed_s: float,
) -> None:
    if not phases:
        print(f"no phase ran: {stop}")
        raise SystemExit(1)
    base = phases[0].runs_per_s_per_device
    total = sum(p.runs for p in phases)
    print(
        f"# Fleet scaling ({total} sign-in runs, {plan.runs_per_device[0]} per device per "
        f"phase up to N = {SMALL}, {plan.runs_per_device[1]} above; "
        f"latency_scale={plan.scale:g}, decider {plan.decider}; "
        f"{machine()})\n"
    )
    print(
        "| devices | runs | wall | utilisation (in steps) | worst device | in runs "
        "| runs/s per device | efficiency vs first | step p50 | gap between runs p50 / tail "
        "| submit → first claim | fleet CPU (of all cores) | machine CPU busy |"
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
    print(
        "\n| devices | workers started | start (spawn → registered) | per worker "
        "| RSS per worker (+ pool child) | PSS per worker | fleet PSS | MemAvailable "
        "| CPU workers / scheduler / API / redis (of all cores) | load 1 min |"
    )
    print("| --- " + "| ---: " * 9 + "|")
    for p in phases:
        m = p.memory or Memory(0, 0, 0, 0)
        print(
            f"| {p.devices} | {p.started} | {p.start_s:.1f} s | {p.start_s / max(1, p.started):.2f} s "
            f"| {m.rss_kib / 1024:.0f} MiB | {m.pss_kib / 1024:.0f} MiB "
            f"| {m.fleet_pss_kib / 1024:.0f} MiB | {m.available_kib / GIB:.1f} GiB "
            f"| {' / '.join(f'{p.cpu_roles[r]:.1%}' for r in ROLES)} | {p.load1:.2f} |"
        )
    summary(phases, stop, mem0_kib, plan.limits)
    print(
        f"Whole run {elapsed_s / 60:.1f} min; load average at the end "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}."
    )


def summary(phases: list[Phase], stop: str | None, mem0_kib: int, limits: Limits) -> None:
    last = phases[-1]
    eff = last.runs_per_s_per_device / phases[0].runs_per_s_per_device
    print(
        f"\n{last.devices} devices: utilisation {last.utilisation:.1%} (goal >= 95 %: "
        f"{'met' if last.utilisation >= 0.95 else 'NOT met'}), efficiency {eff:.3f} "
        f"(goal >= 0.9: {'met' if eff >= 0.9 else 'NOT met'})."
    )
    print(f"Stopped growing N: {stop}." if stop else "No limit hit up to the largest N asked for.")
    busy = [p for p in phases if cpu_saturated(p, limits) and p.fleet_cpu < p.cpu_busy / 2]
    if busy:
        print(
            "Machine CPU saturated mostly by other work (not the fleet's limit, N kept growing) "
            "at N = "
            + ", ".join(f"{p.devices} ({p.cpu_busy:.0%}, fleet {p.fleet_cpu:.0%})" for p in busy)
            + "."
        )
    m = last.memory
    if m is None or not m.pss_kib:
        return
    total = field_kib("/proc/meminfo", "MemTotal:")
    drop = (mem0_kib - m.available_kib) / last.devices  # the whole fleet's, other work included
    by_drop = (
        f"; MemAvailable fell {drop / 1024:.0f} MiB per worker (the whole fleet's cost, other "
        f"work on the machine included): ~{total / drop:.0f}"
        if drop > 0
        else ""
    )
    print(
        f"Memory per worker: {m.pss_kib / 1024:.0f} MiB PSS ({m.rss_kib / 1024:.0f} MiB RSS, "
        f"shared pages counted twice) → {total / GIB:.0f} GiB would hold "
        f"~{total / m.pss_kib:.0f} workers by PSS, ~{total / m.rss_kib:.0f} by RSS{by_drop}."
    )
    per_device_cpu = last.fleet_cpu / last.devices
    if per_device_cpu > 0:
        print(
            f"CPU: the fleet used {last.fleet_cpu:.0%} of all cores at N = {last.devices} "
            f"({per_device_cpu:.2%} per device) → it alone would saturate the cores at "
            f"~{1 / per_device_cpu:.0f} devices (if the cost per device stays linear)."
        )


if __name__ == "__main__":
    main()
