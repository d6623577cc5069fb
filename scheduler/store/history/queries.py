"""The questions a farm asks of its run history, as SQL both dialects answer:

- `pass_rates`: per flow x device class over a window, runs, pass rate and flaky rate. A run
  that was cancelled or never placed is not counted. *Flaky* is the flip rate: of the counted
  runs that followed another of the same flow on the same device, the share whose outcome
  (passed or not) differs from the run before (`follows` / `flipped`, set as the run is
  stored): a flow that always fails is broken, not flaky.
- `step_times`: step p50 / p95 per flow and phase (snapshot, decide, action) per time bucket
  (a day by default), from the daily step-time histograms (`hist`, table `step_hist`): a
  bucket's upper bound, at most 9 % above the exact percentile, read from counts instead of
  sorting every step's time (1,000,000 steps: docs/benchmarks.md).
- `outliers`: devices whose failure rate stands out from the rest of their class: at least
  `min_runs` counted runs, a rate `min_gap` above the others' and 3 binomial standard
  deviations above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.store.history import hist
from scheduler.store.history.db import Database
from workers.core.errors import ConfigError

Z_OUTLIER = 3.0


@dataclass(frozen=True)
class PassRate:
    flow: str
    device_class: str
    runs: int
    passed: int
    pass_rate: float
    flaky_rate: float
    """Outcome flips between consecutive runs on one device, over the pairs there were."""


@dataclass(frozen=True)
class StepTime:
    flow: str
    phase: str
    bucket: float
    """The bucket's start (Unix seconds)."""
    steps: int
    p50_ms: float
    p95_ms: float


@dataclass(frozen=True)
class Outlier:
    device: str
    device_class: str
    runs: int
    failed: int
    failure_rate: float
    class_rate: float
    """The failure rate of the other devices of its class, over the same window."""
    z: float


@dataclass(frozen=True)
class Cost:
    """What the runs that ended in one bucket spent on model calls."""

    bucket: float
    """The bucket's start (Unix seconds, whole UTC days)."""
    runs: int
    """Runs that called a model (tokens or a cost)."""
    input_tokens: int
    output_tokens: int
    cost: float


COSTS_SQL = """
SELECT finished_at, input_tokens, output_tokens, cost FROM runs
WHERE finished_at >= ? AND finished_at < ? AND (input_tokens > 0 OR output_tokens > 0 OR cost > 0)
"""


def costs(db: Database, since: float, until: float, *, bucket_s: int) -> list[Cost]:
    """Model spending per `bucket_s` (whole UTC days) of the runs that ended in the window,
    summed here: the bucket's start differs between SQLite's and PostgreSQL's casts, and only
    runs that called a model are read."""
    sums: dict[int, list[float]] = {}
    for finished, tin, tout, cost in db.query(COSTS_SQL, (since, until)):
        bucket = int(float(finished) // bucket_s * bucket_s)
        acc = sums.setdefault(bucket, [0, 0, 0, 0.0])
        acc[0] += 1
        acc[1] += int(tin)
        acc[2] += int(tout)
        acc[3] += float(cost)
    return [
        Cost(bucket=float(b), runs=int(a[0]), input_tokens=int(a[1]), output_tokens=int(a[2]),
             cost=a[3])
        for b, a in sorted(sums.items())
    ]  # fmt: skip


RATES_SQL = """
SELECT flow, device_class, COUNT(*), SUM(passed), SUM(flipped), SUM(follows)
FROM runs WHERE finished_at >= ? AND finished_at < ? AND counted = 1
GROUP BY flow, device_class ORDER BY flow, device_class
"""


def pass_rates(db: Database, since: float, until: float) -> list[PassRate]:
    out = []
    for flow, cls, runs, passed, flips, pairs in db.query(RATES_SQL, (since, until)):
        out.append(
            PassRate(
                flow=flow,
                device_class=cls,
                runs=int(runs),
                passed=int(passed),
                pass_rate=int(passed) / int(runs),
                flaky_rate=int(flips) / int(pairs) if pairs else 0.0,
            )
        )
    return out


STEP_HIST = "SELECT day, flow, phase, counts FROM step_hist WHERE day >= ? AND day < ?"


def step_times(db: Database, since: float, until: float, *, bucket_s: int) -> list[StepTime]:
    """Whole UTC days: the days that start in [since, until), merged into `bucket_s` buckets
    (a whole number of days)."""
    if bucket_s <= 0 or bucket_s % hist.DAY:
        raise ConfigError(f"bucket: {bucket_s} s is not a whole number of days; give 1d, 7d")
    start = math.ceil(since / hist.DAY) * hist.DAY
    groups: dict[tuple[str, str, int], hist.Dense] = {}
    for day, flow, phase, counts in db.query(STEP_HIST, (start, math.ceil(until))):
        key = (flow, phase, int(day) // bucket_s * bucket_s)
        dense = hist.loads(counts)
        groups[key] = hist.add(groups[key], dense) if key in groups else dense
    return [
        StepTime(
            flow=flow,
            phase=phase,
            bucket=float(b),
            steps=n,
            p50_ms=hist.percentile(dense, 0.5),
            p95_ms=hist.percentile(dense, 0.95),
        )
        for (flow, phase, b), dense in sorted(groups.items())
        if (n := hist.total(dense)) > 0
    ]


PER_DEVICE = """
SELECT device_class, device, COUNT(*), COUNT(*) - SUM(passed)
FROM runs WHERE finished_at >= ? AND finished_at < ? AND counted = 1 AND device <> ''
GROUP BY device_class, device
"""


def outliers(
    db: Database, since: float, until: float, *, min_runs: int = 10, min_gap: float = 0.1
) -> list[Outlier]:
    per: dict[str, list[tuple[str, int, int]]] = {}
    for cls, device, runs, failed in db.query(PER_DEVICE, (since, until)):
        per.setdefault(cls, []).append((device, int(runs), int(failed)))
    out = []
    for cls, devices in per.items():
        total_runs = sum(r for _, r, _ in devices)
        total_failed = sum(f for _, _, f in devices)
        for device, runs, failed in devices:
            other_runs, other_failed = total_runs - runs, total_failed - failed
            if runs < min_runs or other_runs < min_runs:
                continue
            p = other_failed / other_runs
            rate = failed / runs
            spread = math.sqrt(max(p * (1 - p), 1 / other_runs) / runs)
            z = (rate - p) / spread
            if rate - p >= min_gap and z >= Z_OUTLIER:
                out.append(Outlier(device, cls, runs, failed, rate, p, round(z, 2)))
    return sorted(out, key=lambda o: (-o.z, o.device))
