"""The questions a farm asks of its run history, as SQL both dialects answer:

- `pass_rates`: per flow x device class over a window, runs, pass rate and flaky rate. A run
  that was cancelled or never placed is not counted. *Flaky* is the flip rate: of the
  consecutive pairs of counted runs of one flow on one device, the share whose outcome (passed
  or not) differs from the run before: a flow that always fails is broken, not flaky.
- `step_times`: step p50 / p95 per flow and phase (snapshot, decide, action) per time bucket
  (a day by default): PostgreSQL's `percentile_disc`; SQLite has none, so there the same
  discrete percentile comes from a window (the first value whose rank reaches p of the count).
- `outliers`: devices whose failure rate stands out from the rest of their class: at least
  `min_runs` counted runs, a rate `min_gap` above the others' and 3 binomial standard
  deviations above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.store.history.db import Database

PHASES = ("snapshot", "decide", "action")
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


RATES_SQL = """
SELECT flow, device_class, COUNT(*), SUM(passed),
       SUM(CASE WHEN prev IS NOT NULL AND prev <> passed THEN 1 ELSE 0 END),
       SUM(CASE WHEN prev IS NOT NULL THEN 1 ELSE 0 END)
FROM (SELECT flow, device_class, passed,
             LAG(passed) OVER (PARTITION BY flow, device ORDER BY finished_at, run_id) AS prev
      FROM runs WHERE finished_at >= ? AND finished_at < ? AND counted = 1) AS r
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


def _phase_rows(dialect: str, bucket_s: int) -> str:
    # SQLite may lack FLOOR; its CAST truncates, PostgreSQL's rounds (times are positive)
    whole = "FLOOR" if dialect == "postgresql" else ""
    bucket = f"(CAST({whole}(finished_at / {bucket_s}) AS BIGINT) * {bucket_s})"
    return " UNION ALL ".join(
        f"SELECT flow, '{ph}' AS phase, {bucket} AS bucket, {ph}_ms AS ms FROM steps "  # noqa: S608 - our names and an int
        "WHERE finished_at >= ? AND finished_at < ?"
        for ph in PHASES
    )


def step_times_sql(dialect: str, bucket_s: int) -> str:
    rows = _phase_rows(dialect, bucket_s)
    if dialect == "postgresql":
        return (
            "SELECT flow, phase, bucket, COUNT(*), "  # noqa: S608 - `rows` is ours
            "percentile_disc(0.5) WITHIN GROUP (ORDER BY ms), "
            "percentile_disc(0.95) WITHIN GROUP (ORDER BY ms) "
            f"FROM ({rows}) AS s GROUP BY flow, phase, bucket ORDER BY flow, phase, bucket"
        )
    return (
        "SELECT flow, phase, bucket, MAX(n), "  # noqa: S608 - `rows` is ours
        "MIN(CASE WHEN rn * 100 >= 50 * n THEN ms END), "
        "MIN(CASE WHEN rn * 100 >= 95 * n THEN ms END) "
        "FROM (SELECT flow, phase, bucket, ms, "
        "ROW_NUMBER() OVER (PARTITION BY flow, phase, bucket ORDER BY ms) AS rn, "
        "COUNT(*) OVER (PARTITION BY flow, phase, bucket) AS n "
        f"FROM ({rows}) AS s) AS w GROUP BY flow, phase, bucket ORDER BY flow, phase, bucket"
    )


def step_times(db: Database, since: float, until: float, *, bucket_s: int) -> list[StepTime]:
    sql = step_times_sql(db.dialect, bucket_s)
    rows = db.query(sql, (since, until) * len(PHASES))
    return [
        StepTime(
            flow=flow,
            phase=phase,
            bucket=float(bucket),
            steps=int(n),
            p50_ms=float(p50),
            p95_ms=float(p95),
        )
        for flow, phase, bucket, n, p50, p95 in rows
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
