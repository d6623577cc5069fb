"""Decision memory on vs off: the same sign-in runs on the same fleet, measured in one run.

Fleet (separate processes, `bench/_fleet.py`): its own redis-server, `goalfleet api`,
`goalfleet scheduler`, and 16 `goalfleet worker`s on sim devices — 8 iOS, 8 Android; half
run the sign-in app, half the `relabel` app, whose buttons read "Continue"/"Next" and
"Sign in"/"Log in" from run to run (a remembered decision must miss there, never press the
wrong thing) — at realistic latencies, deciding with `bench/rules-650` (the rules decider
after a 650 ms sleep: a model's think time without a model server on the same two cores).

Phases, in this order: **off** (every run `"memory": false`), then **on** (memory flushed
first). Each phase submits `runs` sign-in runs as one batch across all devices. From the step
rows:

- decide time p50 of a memory hit vs of a decider call;
- hit rate: hits ÷ decisions, over runs that started after the first run of their flow
  (platform and app) ended (from the second run of each flow on), and over all runs;
- run wall time p50 (claim → result) on vs off, and model calls saved;
- **wrong actions from memory**: every step decided from memory is decided again, offline,
  by the rules decider on the very state the step saw (`StepRow.seen`); any difference is a
  wrong action. Invalidations (a remembered action that moved nothing) are counted too.

    .venv/bin/python -m bench.bench_decision_memory            # full: 16 devices, 160 runs
    .venv/bin/python -m bench.bench_decision_memory --quick    # CI: 4 devices, 16 runs, 0.1x
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from bench._fleet import SIGN_IN, TOKEN, BenchFleet, machine, median, percentile
from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import SimWorker
from workers.core.model import RunStatus, StepRow
from workers.core.records import RunRecord
from workers.decide.rules import RulesDecider


@dataclass(frozen=True)
class Phase:
    name: str
    runs: int
    done: int
    wall_s: float
    run_p50_s: float
    decisions: int
    hits: int
    misses: int
    invalidated: int
    hit_rate_later: float
    hit_rate_all: float
    decide_hit_p50_ms: float
    decide_hit_p95_ms: float
    decide_model_p50_ms: float
    model_calls: int
    wrong_from_memory: int


def flow(r: RunRecord, apps: dict[str, str]) -> str:
    return apps.get(r.device or "", "?")


def analyse(name: str, records: list[RunRecord], apps: dict[str, str], wall_s: float) -> Phase:
    rules = RulesDecider()
    first_end: dict[str, float] = {}
    for r in sorted(records, key=lambda r: r.finished_at or 0.0):
        first_end.setdefault(flow(r, apps), r.finished_at or 0.0)
    rows_all: list[StepRow] = []
    rows_later: list[StepRow] = []
    durations = []
    for r in records:
        assert r.result is not None  # noqa: S101 - finished runs carry results
        durations.append(r.result.duration_ms / 1000)
        rows = [s for s in r.result.steps if s.decision is not None]
        rows_all += rows
        if (r.started_at or 0.0) > first_end[flow(r, apps)]:
            rows_later += rows
    hit_rows = [s for s in rows_all if s.decision and s.decision.decided_by == "memory"]
    model_rows = [s for s in rows_all if s.decision and s.decision.decided_by == "rules"]
    wrong = 0
    for s in hit_rows:
        assert s.seen is not None  # noqa: S101 - a decided row keeps what it saw
        assert s.decision is not None  # noqa: S101 - a decided row
        again = rules.decide(s.seen)
        if (again.target, again.input, again.done) != (
            s.decision.target,
            s.decision.input,
            s.decision.done,
        ):
            wrong += 1

    def rate(rows: list[StepRow]) -> float:
        hits = sum(1 for s in rows if s.decision and s.decision.decided_by == "memory")
        return hits / len(rows) if rows else 0.0

    return Phase(
        name=name,
        runs=len(records),
        done=sum(r.status is RunStatus.DONE for r in records),
        wall_s=wall_s,
        run_p50_s=median(durations),
        decisions=len(rows_all),
        hits=len(hit_rows),
        misses=sum(1 for s in rows_all if s.memory and s.memory.outcome == "miss"),
        invalidated=sum(1 for s in rows_all if s.memory and s.memory.outcome == "invalidated"),
        hit_rate_later=rate(rows_later),
        hit_rate_all=rate(rows_all),
        decide_hit_p50_ms=median([s.decide_ms for s in hit_rows]) if hit_rows else 0.0,
        decide_hit_p95_ms=percentile([s.decide_ms for s in hit_rows], 95) if hit_rows else 0.0,
        decide_model_p50_ms=median([s.decide_ms for s in model_rows]) if model_rows else 0.0,
        model_calls=len(model_rows),
        wrong_from_memory=wrong,
    )


def run_phase(
    client: FleetClient, name: str, runs: int, decider: str, *, memory: bool, timeout_s: float
) -> tuple[list[RunRecord], float]:
    body = {
        **{k: v for k, v in SIGN_IN.items() if k != "done_when"},  # the decider says done
        "decider": decider,
        "selector": {"labels": {"bench": "memory"}},
        "count": runs,
        "memory": memory,
    }
    t0 = time.time()
    batch = client.submit_batch(body)
    client.wait_batch(batch.id, poll_s=0.5, timeout_s=timeout_s)
    print(f"  phase {name}: {time.time() - t0:.1f} s", flush=True)
    return client.batch_runs(batch.id), time.time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    args = ap.parse_args()
    devices = 4 if args.quick else 16
    runs = args.runs or (16 if args.quick else 160)
    scale = 0.1 if args.quick else 1.0
    decider = f"bench/rules-{650 * scale:g}"
    workers = [
        SimWorker(
            f"m{i + 1:02d}",
            latency_scale=scale,
            labels={"bench": "memory"},
            platform=("ios", "android")[i % 2],
            app=("signin", "relabel")[(i // 2) % 2],
        )
        for i in range(devices)
    ]
    apps = {w.device: f"{w.platform}/{w.app}" for w in workers}
    timeout_s = 60 + runs * 15 * scale / devices * 20
    with BenchFleet() as fleet:
        fleet.start_api()
        fleet.start_scheduler()
        fleet.start_workers(workers)
        with FleetClient(fleet.api_url, token=TOKEN) as client:
            off, off_s = run_phase(client, "off", runs, decider, memory=False, timeout_s=timeout_s)
            client.forget_many()
            on, on_s = run_phase(client, "on", runs, decider, memory=True, timeout_s=timeout_s)
    report(
        [analyse("off", off, apps, off_s), analyse("on", on, apps, on_s)],
        devices=devices,
        scale=scale,
        decider=decider,
    )


def report(phases: list[Phase], *, devices: int, scale: float, decider: str) -> None:
    off, on = phases
    print(
        f"\n# Decision memory, off vs on ({on.runs} sign-in runs per phase on {devices} sim "
        f"devices, half of them relabelling; latency_scale={scale:g}, decider {decider}; "
        f"{machine()})\n"
    )
    print("| | memory off | memory on | on ÷ off |")
    print("| --- | ---: | ---: | ---: |")

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else ""

    hit = f"{on.decide_hit_p50_ms:.2f} / {on.decide_hit_p95_ms:.2f} ms"
    rows = [
        ("runs done", f"{off.done}/{off.runs}", f"{on.done}/{on.runs}", ""),
        ("phase wall time", f"{off.wall_s:.1f} s", f"{on.wall_s:.1f} s", ratio(on.wall_s, off.wall_s)),
        ("run wall time p50", f"{off.run_p50_s:.2f} s", f"{on.run_p50_s:.2f} s", ratio(on.run_p50_s, off.run_p50_s)),
        ("decisions", str(off.decisions), str(on.decisions), ""),
        ("decider (model) calls", str(off.model_calls), str(on.model_calls), ratio(on.model_calls, off.model_calls)),
        ("decide p50, decider", f"{off.decide_model_p50_ms:.1f} ms", f"{on.decide_model_p50_ms:.1f} ms", ""),
        ("decide p50 / p95, memory hit", "-", hit, ""),
        ("hit rate, from each flow's 2nd run on", "-", f"{on.hit_rate_later:.1%}", ""),
        ("hit rate, all runs", "-", f"{on.hit_rate_all:.1%}", ""),
        ("invalidated entries (one wasted action each)", "-", str(on.invalidated), ""),
        ("wrong actions from memory", "-", str(on.wrong_from_memory), ""),
    ]  # fmt: skip
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
