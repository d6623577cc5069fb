"""Throughput at zero device latency: what the fleet itself costs per run, against a bare
Celery no-op task measured in the same run.

Fleet (all separate processes, `bench/_fleet.py`): its own redis-server, `goalfleet api`,
`goalfleet scheduler`, and N `goalfleet worker`s (Celery prefork, one pool child, prefetch 1,
acknowledged on receipt) on zero-latency sim sign-in devices, deciding with the offline rules
decider, no session logs (as in production). One batch of `--runs` sign-in runs (4 steps each: fill
email, fill password, press Sign in, see Welcome) through `POST /v1/batches`, a selector
matching the N devices: first submit → last run done (the latest `finished_at`).

Baseline: N bare Celery workers, made by the same `make_celery(settings)` and started with the
same flags (`workers.fleet.worker.worker_argv`: prefork, one child, prefetch 1, acknowledged
on receipt, task events off), all consuming one queue, serving `bench.bare` (`bench/_worker.py`): no result
stored (`ignore_result`, as the fleet's run task), its one act appending its `time.time()`
to a file. The benchmark sends `--runs` of them (`apply_async`, results ignored): first send
→ the last one's stamp.

A third side, **bare + round trips**: the same bare workers serving `bench.trips`, the bare
task plus the store round trips a run makes (`ROUND_TRIPS` script calls, each writing a
step-row-sized value): what the fleet's guarantees (a claim, every step row written before the
next action, a finish) cost in Redis calls alone, with no loop, device or decider around them.
The fleet's own Python is what lies between that side and the fleet.

Per side, the CPU its processes used during the batch (from /proc, each worker with its pool
child; Redis from `INFO cpu`, which cannot tell the sides' commands apart: the other side's
idle workers poll it too), per run, by process; for the baseline the sender is this
benchmark's own process while it sends. Both sides' workers stay up throughout, so each
side runs beside the other's idle workers. Rounds alternate fleet, baseline; medians.

    .venv/bin/python -m bench.bench_throughput            # 8 workers a side, 400 runs, 3 rounds
    .venv/bin/python -m bench.bench_throughput --quick    # CI: 2 workers, 40 runs, 1 round
    .venv/bin/python -m bench.bench_throughput --profile DIR   # the fleet side only, profiled
    .venv/bin/python -m bench.bench_throughput --screenshots on   # with every step's picture
    .venv/bin/python -m bench.bench_throughput --trips 7   # the third side with 7 round trips
    .venv/bin/python -m bench.bench_throughput --profile-main DIR  # the workers' main threads

Step pictures (`GOALFLEET_SCREENSHOTS`, `on` by default in production) are off unless
`--screenshots` says otherwise: they are a feature's cost per step (a render, a mask, a stored
PNG), not the fleet's own, and the fleet took none before they came (§11 measures them).

`--profile-main DIR`: every worker's main process profiles its main thread (Celery's consumer
loop; `time.thread_time`, `bench/_worker.py`) from ready to shutdown, on both sides (no third
side), and the fleet's and the bare workers' calls and CPU per task are printed side by side.

`--profile DIR`: the fleet's workers profile their pool child over whole runs (cProfile,
`bench/_worker.py`: from Celery's `task_prerun` to its `task_postrun`, claim to finish), and
after one batch the top functions by own time are printed, with per run: Redis round trips
(`send_packed_command`: one per command, pipeline or script call), pydantic validations and
serialisations, and log lines rendered. Profiling slows the workers: its runs/s mean nothing.
"""

from __future__ import annotations

import argparse
import os
import pstats
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import redis

from bench._fleet import SIGN_IN, TOKEN, BenchFleet, machine, median
from bench._worker import BARE_TASK, MAIN_PROFILE_ENV, PROFILE_ENV, TRIPS_TASK, noop_done
from bench.bench_scaling import proc_table, with_descendants
from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import SimWorker
from workers.core.model import RunStatus
from workers.fleet.celery_app import make_celery
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys

BARE_QUEUE = "bench.bare"
LABELS = {"throughput": "y"}
FLEET_ROLES = ("api", "scheduler", "workers", "redis")
BARE_ROLES = ("sender", "workers", "redis")
CLK_TCK = os.sysconf("SC_CLK_TCK")
ROUND_TRIPS = 12
"""The store round trips of one 4-step sign-in run in a pool child (`--profile` counts them:
"Redis round trips"): the claim, the cancel check before the first step, a memory lookup and
a row write a step (five steps: four actions and the done), the finish."""
ROW_BYTES = 1400
"""About a step row's JSON (1.4-1.5 KB for the sign-in run's action steps): the value each
round trip of the third side writes."""


@dataclass(frozen=True)
class Side:
    """One side's batch: runs (or tasks) per second and CPU ms per run by process."""

    per_s: float
    cpu_ms: dict[str, float]
    main_ms: float
    """Of `cpu_ms["workers"]`, the workers' main processes (Celery's consumer); the rest is
    their pool children's (the task bodies)."""

    @property
    def total_ms(self) -> float:
        return sum(self.cpu_ms.values())


def cpu_by_name(fleet: BenchFleet, prefix: str, *, children: bool = True) -> float:
    """CPU seconds so far of the fleet's processes named `prefix*`, with their children
    (without: a worker's main process alone, not its pool child)."""
    table = proc_table()
    pids = [child.pid for name, child in fleet.procs.items() if name.startswith(prefix)]
    counted = with_descendants(pids, table) if children else {p for p in pids if p in table}
    return sum(table[p].cpu_ticks for p in counted) / CLK_TCK


def redis_cpu_s(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def wait_until(done: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not done in {timeout_s:g} s")
        time.sleep(0.01)


def fleet_batch(fleet: BenchFleet, client: FleetClient, r: redis.Redis, runs: int) -> Side:
    keys = Keys(fleet.require_settings().key_prefix)
    before = {p: cpu_by_name(fleet, p) for p in ("api", "scheduler", "worker-")}
    main0 = cpu_by_name(fleet, "worker-", children=False)
    redis0 = redis_cpu_s(r)
    t0 = time.time()
    batch = client.submit_batch({**SIGN_IN, "count": runs, "selector": {"labels": LABELS}})
    wait_until(lambda: int(r.hget(keys.batch(batch.id), "finished") or 0) >= runs, 60 + runs)
    after = {p: cpu_by_name(fleet, p) for p in before}
    main = cpu_by_name(fleet, "worker-", children=False) - main0
    used = {"redis": redis_cpu_s(r) - redis0}
    records = client.batch_runs(batch.id)
    bad = [rec for rec in records if rec.status is not RunStatus.DONE]
    if bad:
        raise RuntimeError(f"{len(bad)} runs did not end done: {bad[0].status} {bad[0].reason}")
    end = max(rec.finished_at or 0.0 for rec in records)
    used |= {"api": after["api"] - before["api"]}
    used |= {"scheduler": after["scheduler"] - before["scheduler"]}
    used |= {"workers": after["worker-"] - before["worker-"]}
    per_run = {k: used[k] * 1000 / runs for k in FLEET_ROLES}
    return Side(runs / (end - t0), per_run, main * 1000 / runs)


def stamps(path: Path) -> list[float]:
    if not path.exists():
        return []
    return [float(line.split()[1]) for line in path.read_text().splitlines() if line]


def bare_batch(fleet: BenchFleet, send: Callable[[], object], r: redis.Redis, runs: int) -> Side:
    done = noop_done(fleet.dir)
    seen = len(stamps(done))
    workers0, redis0 = cpu_by_name(fleet, "noop-"), redis_cpu_s(r)
    main0 = cpu_by_name(fleet, "noop-", children=False)
    own0 = time.process_time()
    t0 = time.time()
    for _ in range(runs):
        send()
    sender = time.process_time() - own0
    wait_until(lambda: len(stamps(done)) >= seen + runs, 60 + runs)
    used = {
        "sender": sender,
        "workers": cpu_by_name(fleet, "noop-") - workers0,
        "redis": redis_cpu_s(r) - redis0,
    }
    main = cpu_by_name(fleet, "noop-", children=False) - main0
    end = max(stamps(done)[seen:])
    per_run = {k: used[k] * 1000 / runs for k in BARE_ROLES}
    return Side(runs / (end - t0), per_run, main * 1000 / runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR")
    ap.add_argument("--profile-main", type=Path, default=None, metavar="DIR")
    ap.add_argument("--screenshots", choices=["on", "off", "failure-only"], default="off")
    ap.add_argument(
        "--trips", type=int, default=ROUND_TRIPS, help="the third side's round trips a task"
    )
    args = ap.parse_args()
    n = args.workers or (2 if args.quick else 8)
    runs = args.runs or (40 if args.quick else 400)
    rounds = args.rounds or (1 if args.quick else 3)
    if args.profile is not None:
        profile(n, runs, args.profile, args.screenshots)
        return
    if args.profile_main is not None:
        directory = fresh(args.profile_main)
        measure(n, runs, rounds, args.screenshots, {MAIN_PROFILE_ENV: str(directory)})
        report_main(n, directory, tasks=2 * n + rounds * runs)
        return
    sides = measure(n, runs, rounds, args.screenshots, trips=args.trips)
    report(n, runs, rounds, sides, args.screenshots, args.trips)


def fresh(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.prof"):
        old.unlink()
    return directory


def measure(
    n: int,
    runs: int,
    rounds: int,
    screenshots: str,
    env: dict[str, str] | None = None,
    *,
    trips: int = 0,
) -> dict[str, list[Side]]:
    """`rounds` rounds of a fleet batch, then a bare batch (and a bare + `trips` round trips
    batch unless 0), after one warm-up batch each; every process started with `env` added."""
    sides: dict[str, list[Side]] = {"fleet": [], "bare": [], "trips": []}
    with BenchFleet(screenshots=screenshots) as fleet:
        fleet.env.update(env or {})
        fleet.start_api()
        fleet.start_scheduler()
        sims = [SimWorker(f"t{i + 1:02d}", labels=LABELS) for i in range(n)]
        fleet.start_workers(sims, session_logs=False)
        fleet.start_noop_workers([f"bare{i + 1:02d}" for i in range(n)], BARE_QUEUE)
        settings = fleet.require_settings()
        r = redis_client(settings.redis_url)
        app = make_celery(settings)

        def bare_body() -> None:
            return None

        def trips_body(n: int, payload: str) -> None:  # noqa: ARG001 - the signature sent
            return None

        bare = app.task(name=BARE_TASK, ignore_result=True)(bare_body)
        with_trips = app.task(name=TRIPS_TASK, ignore_result=True)(trips_body)
        row = "r" * ROW_BYTES
        sends: dict[str, Callable[[], object]] = {
            "bare": lambda: bare.apply_async(queue=BARE_QUEUE)
        }
        if trips:
            sends["trips"] = lambda: with_trips.apply_async((trips, row), queue=BARE_QUEUE)

        with FleetClient(fleet.api_url, token=TOKEN) as client:
            fleet_batch(fleet, client, r, 2 * n)  # warm-up: each pool child imports the loop
            for send in sends.values():
                bare_batch(fleet, send, r, 2 * n)
            for _ in range(rounds):
                sides["fleet"].append(fleet_batch(fleet, client, r, runs))
                for name, send in sends.items():
                    sides[name].append(bare_batch(fleet, send, r, runs))
        app.close()
    return sides


def report_main(n: int, directory: Path, *, tasks: int) -> None:
    """The workers' main processes, fleet against bare, per task: the same Celery calls, at
    what CPU each (main thread only)."""
    per = {
        side: pstats.Stats(*map(str, directory.glob(f"{side}-*.prof"))).stats  # type: ignore[attr-defined]
        for side in ("fleet", "bare")
    }
    print(f"# The workers' main threads, fleet against bare ({n} a side, {tasks} tasks each)\n")
    total = {side: sum(v[2] for v in st.values()) * 1000 / tasks for side, st in per.items()}
    print(f"profiled CPU per task: fleet {total['fleet']:.2f} ms, bare {total['bare']:.2f} ms\n")
    counted = {
        "consumer loop turns (`create_loop`)": "create_loop",
        "`parse_response` calls (redis-py's and kombu's)": "parse_response",
        "messages delivered (`_deliver`)": "_deliver",
        "acks (`basic_ack`)": "basic_ack",
    }
    print("| per task | fleet | bare |\n| --- | ---: | ---: |")
    for what, name in counted.items():
        calls = [
            sum(v[1] for k, v in per[side].items() if k[2] == name) / tasks
            for side in ("fleet", "bare")
        ]
        print(f"| {what} | {calls[0]:.2f} | {calls[1]:.2f} |")
    by_own = sorted(per["fleet"].items(), key=lambda kv: kv[1][2], reverse=True)[:15]
    print("\n| function (top by the fleet's own time) | fleet ms per task | bare ms per task |")
    print("| --- | ---: | ---: |")
    for key, (_, _, tt, _, _) in by_own:
        bare_tt = per["bare"].get(key, (0, 0, 0.0, 0, 0))[2]
        where = f"{Path(key[0]).name}:{key[1]}" if key[1] else "~"
        print(f"| `{key[2]}` ({where}) | {tt * 1000 / tasks:.3f} | {bare_tt * 1000 / tasks:.3f} |")


def profile(n: int, runs: int, directory: Path, screenshots: str) -> None:
    fresh(directory)
    with BenchFleet(screenshots=screenshots) as fleet:
        fleet.start_api()
        fleet.start_scheduler(profile=directory / "scheduler.pstats")
        fleet.env[PROFILE_ENV] = str(directory)
        sims = [SimWorker(f"t{i + 1:02d}", labels=LABELS) for i in range(n)]
        fleet.start_workers(sims, session_logs=False)
        r = redis_client(fleet.require_settings().redis_url)
        with FleetClient(fleet.api_url, token=TOKEN) as client:
            fleet_batch(fleet, client, r, 2 * n)
            for old in directory.glob("*.prof"):  # the warm-up's runs (imports) left out
                old.unlink()
            fleet_batch(fleet, client, r, runs)
    report_profile(n, directory)
    scheduler = directory / "scheduler.pstats"
    if scheduler.exists():  # written when it stopped
        entries = pstats.Stats(str(scheduler)).stats  # type: ignore[attr-defined]
        done = runs + 2 * n
        ours = [
            kv for kv in entries.items() if "/scheduler/" in kv[0][0] or "/workers/" in kv[0][0]
        ]
        print(
            f"\nThe scheduler over its whole life ({done} runs; wall time), goalfleet's functions:\n"
        )
        print("| function | own ms per run | cumulative ms per run | calls per run |")
        print("| --- | ---: | ---: | ---: |")
        for (file, line, fn), (_, nc, tt, ct, _) in sorted(
            ours, key=lambda kv: kv[1][3], reverse=True
        )[:20]:
            print(
                f"| `{fn}` ({Path(file).name}:{line}) | {tt * 1000 / done:.3f} | {ct * 1000 / done:.3f} | {nc / done:.1f} |"
            )


def report_profile(n: int, directory: Path) -> None:
    """The profiles' figures per run: divided by the runs they hold (a pool child's profile
    also holds its warm-up runs: its profiler is one since it started)."""
    files = sorted(str(p) for p in directory.glob("*.prof"))
    stats = pstats.Stats(*files)
    entries = stats.stats  # type: ignore[attr-defined] # pstats' own table: (file, line, name) → ...
    total = sum(tt for _, _, tt, _, _ in entries.values())
    runs = sum(nc for (_, _, fn), (_, nc, _, _, _) in entries.items() if fn == "execute_run")
    print(f"# A worker's pool child over {runs} whole runs ({n} workers, {machine()})\n")
    print(f"profiled CPU per run: {total * 1000 / runs:.2f} ms (cProfile's overhead included)\n")
    counted = {
        "Redis round trips": ("send_packed_command",),
        "pydantic validations": ("model_validate", "model_validate_json", "validate_python"),
        "pydantic serialisations": ("model_dump", "model_dump_json", "dump_json", "dump_python"),
        "pydantic model_copy": ("model_copy",),
        "log lines rendered": ("_process_event",),
    }
    print("| per run | calls |\n| --- | ---: |")
    for what, names in counted.items():
        calls = sum(nc for (_, _, fn), (_, nc, _, _, _) in entries.items() if fn in names)
        print(f"| {what} | {calls / runs:.1f} |")
    per = 1000 / runs
    by_own = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:25]
    ours = [kv for kv in entries.items() if "/workers/" in kv[0][0] or "/scheduler/" in kv[0][0]]
    by_cum = sorted(ours, key=lambda kv: kv[1][3], reverse=True)[:25]
    for title, rows in (("own time", by_own), ("goalfleet's functions, cumulative", by_cum)):
        print(f"\nTop by {title}:\n")
        print("| function | own ms per run | cumulative ms per run | calls per run |")
        print("| --- | ---: | ---: | ---: |")
        for (file, line, fn), (_, nc, tt, ct, _) in rows:
            where = f"{Path(file).name}:{line}" if line else file
            print(f"| `{fn}` ({where}) | {tt * per:.3f} | {ct * per:.3f} | {nc / runs:.1f} |")


def med(sides: Iterable[Side], key: Callable[[Side], float]) -> float:
    return median([key(s) for s in sides])


def report(  # noqa: PLR0917 - the figures and how they were made
    n: int, runs: int, rounds: int, sides: dict[str, list[Side]], screenshots: str, trips: int
) -> None:
    print(
        f"# Throughput at zero device latency ({n} workers a side, {runs} runs a batch, "
        f"{rounds} rounds, step pictures {screenshots}, medians, {machine()})\n"
    )
    titles = {
        "fleet": "fleet, 4-step sign-in runs",
        "bare": "bare Celery no-op tasks",
        "trips": f"bare + {trips} store round trips",
    }
    print("| | per s | CPU per run | by process (ms per run) | workers: main / pool child |")
    print("| --- | ---: | ---: | --- | --- |")
    for name, title in titles.items():
        got = sides[name]
        roles = FLEET_ROLES if name == "fleet" else BARE_ROLES
        by = " / ".join(f"{k} {median([s.cpu_ms[k] for s in got]):.2f}" for k in roles)
        main = med(got, lambda s: s.main_ms)
        child = med(got, lambda s: s.cpu_ms["workers"] - s.main_ms)
        print(
            f"| {title} | {med(got, lambda s: s.per_s):.1f} | "
            f"{med(got, lambda s: s.total_ms):.2f} ms | {by} | {main:.2f} / {child:.2f} |"
        )
    for name in ("bare", "trips"):
        rate = [f.per_s / b.per_s for f, b in zip(sides["fleet"], sides[name], strict=True)]
        cpu = [f.total_ms / b.total_ms for f, b in zip(sides["fleet"], sides[name], strict=True)]
        print(
            f"| fleet / {titles[name]}, by round | {' '.join(f'{x:.2f}' for x in rate)} "
            f"(median {median(rate):.2f}) | {' '.join(f'{x:.2f}' for x in cpu)} "
            f"(median {median(cpu):.2f}) | | |"
        )
    floor = [t.total_ms / b.total_ms for t, b in zip(sides["trips"], sides["bare"], strict=True)]
    print(
        f"| {titles['trips']} / bare, by round | | {' '.join(f'{x:.2f}' for x in floor)} "
        f"(median {median(floor):.2f}) | | |"
    )


if __name__ == "__main__":
    main()
