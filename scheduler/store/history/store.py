"""The history store seam (`HistoryStore`) and its one implementation over SQL
(`SqlHistory`: PostgreSQL for a fleet, SQLite embedded for `goalfleet run` and the demo).

Writes are idempotent: a run by its id, a step by (run, attempt, step). A writer that stored a
slice and died before it said so stores it again and nothing changes (a run already stored at
its attempt is skipped, so the step-time counts of `step_hist` count each step once). A run
whose attempt grew since it was stored (a person's answer re-queued it) replaces its steps and
their counts.

Retention is by time, not partitions: `prune(before)` deletes runs, steps and counts that ended
before it (whole days) through the end-time indexes, in bounded slices. Why not partitions:
the same schema and code serve SQLite, the questions read the runs table and the step-time
counts (`step_hist`), not the steps, so the steps table's size does not slow them (1,000,000
steps: docs/benchmarks.md); a farm past ~10^8 steps would partition `steps` by month in
PostgreSQL and drop whole months instead of deleting rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from scheduler.store.history import hist, queries
from scheduler.store.history.db import Database
from scheduler.store.history.queries import Cost, Outlier, PassRate, StepTime
from scheduler.store.history.rows import RUN_COLUMNS, STEP_COLUMNS, RunHistory

PRUNE_SLICE = 10_000


class HistoryStore(Protocol):
    """Where ended runs go to be asked about later."""

    def where(self) -> str:
        """The database, as a person may be shown it (no password)."""
        ...

    def write(self, runs: Sequence[RunHistory]) -> None:
        """Store `runs` and their steps (all or none; idempotent)."""
        ...

    def prune(self, before: float) -> int:
        """Delete what ended before `before`; returns the runs deleted."""
        ...

    def pass_rates(self, since: float, until: float) -> list[PassRate]: ...

    def step_times(self, since: float, until: float, *, bucket_s: int) -> list[StepTime]: ...

    def outliers(self, since: float, until: float, *, min_runs: int = 10) -> list[Outlier]: ...

    def costs(self, since: float, until: float, *, bucket_s: int) -> list[Cost]: ...

    def close(self) -> None: ...


def _upsert(table: str, columns: Sequence[str], key: Sequence[str]) -> str:
    marks = ", ".join("?" for _ in columns)
    sets = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "  # noqa: S608 - our names
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sets}"
    )


UPSERT_RUN = _upsert("runs", RUN_COLUMNS, ("run_id",))
UPSERT_STEP = _upsert("steps", STEP_COLUMNS, ("run_id", "attempt", "step"))
UPSERT_HIST = (
    "INSERT INTO step_hist (day, flow, phase, steps, counts) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (day, flow, phase) DO UPDATE SET steps = excluded.steps, counts = excluded.counts"
)
STEP_TIMES_OF = (
    "SELECT flow, finished_at, snapshot_ms, decide_ms, action_ms FROM steps "
    "WHERE run_id = ? AND attempt < ?"
)
WRITE_LOCK = 280_001
"""The PostgreSQL advisory lock every history write takes (two schedulers never race on the
step-time counts)."""


def _merged(cur: Any, delta: dict[hist.Group, Counter[int]]) -> list[tuple[object, ...]]:  # noqa: ANN401
    """The `step_hist` rows `delta` changes, read (in the write's transaction) and added to."""
    if not delta:
        return []
    days = sorted({d for d, _, _ in delta})
    flows = sorted({f for _, f, _ in delta})
    marks = ", ".join("?" for _ in days), ", ".join("?" for _ in flows)
    query = (
        "SELECT day, flow, phase, counts FROM step_hist "  # noqa: S608 - marks only
        f"WHERE day IN ({marks[0]}) AND flow IN ({marks[1]})"
    )
    now = {
        (d, f, p): hist.counter(hist.loads(c)) for d, f, p, c in cur.fetch(query, [*days, *flows])
    }
    rows: list[tuple[object, ...]] = []
    for group, change in delta.items():
        merged = now.get(group, Counter())
        merged.update(change)
        rows.append((*group, sum(merged.values()), hist.dumps(merged)))
    return rows


def _flips(cur: Any, runs: list[RunHistory]) -> dict[str, tuple[int, int]]:  # noqa: ANN401
    """(follows, flipped) of each run: against the counted run of its flow on its device that
    ended last before it, in `runs` or already stored (one lookup per flow and device)."""
    out = {h.run.run_id: (0, 0) for h in runs}
    counted = sorted(
        (h.run for h in runs if h.run.counted and h.run.device),
        key=lambda r: (r.finished_at, r.run_id),
    )
    first: dict[tuple[str, str], float] = {}
    for r in counted:
        first.setdefault((r.flow, r.device), r.finished_at)
    if not first:
        return out
    pairs = list(first.items())
    values = ", ".join("(?, ?, ?)" for _ in pairs)
    query = (
        f"WITH p(flow, device, before) AS (VALUES {values}) "  # noqa: S608 - marks only
        "SELECT p.flow, p.device, (SELECT r.passed FROM runs AS r WHERE r.flow = p.flow "
        "AND r.device = p.device AND r.counted = 1 AND r.finished_at < p.before "
        "ORDER BY r.finished_at DESC LIMIT 1) FROM p"
    )
    params = [v for (flow, device), before in pairs for v in (flow, device, before)]
    last: dict[tuple[str, str], int | None] = {
        (flow, device): passed for flow, device, passed in cur.fetch(query, params)
    }
    for r in counted:
        prev = last.get((r.flow, r.device))
        if prev is not None:
            out[r.run_id] = (1, int(prev != r.passed))
        last[r.flow, r.device] = r.passed
    return out


class SqlHistory:
    """`HistoryStore` over a `Database` (the schema must be upgraded: `goalfleet db upgrade`,
    or `upgrade()`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    def open(cls, url: str, *, upgrade: bool = False) -> SqlHistory:
        store = cls(Database(url))
        if upgrade:
            store.db.upgrade()
        return store

    def where(self) -> str:
        return self.db.where()

    def write(self, runs: Sequence[RunHistory]) -> None:
        if not runs:
            return
        with self.db.transaction() as cur:
            if self.db.dialect == "postgresql":  # one writer at a time keeps `step_hist` exact
                cur.run("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK,))
            marks = ", ".join("?" for _ in runs)
            ids = [h.run.run_id for h in runs]
            query = f"SELECT run_id, attempt FROM runs WHERE run_id IN ({marks})"  # noqa: S608
            stored = dict(cur.fetch(query, ids))
            fresh = [h for h in runs if stored.get(h.run.run_id, -1) < h.run.attempt]
            if not fresh:
                return
            delta = hist.counts(
                (s.flow, s.finished_at, s.snapshot_ms, s.decide_ms, s.action_ms)
                for h in fresh
                for s in h.steps
            )
            replaced = [(h.run.run_id, h.run.attempt) for h in fresh if h.run.run_id in stored]
            for rid, attempt in replaced:  # an earlier attempt's steps: out of the counts too
                for group, old in hist.counts(cur.fetch(STEP_TIMES_OF, (rid, attempt))).items():
                    delta.setdefault(group, Counter()).subtract(old)
            cur.many("DELETE FROM steps WHERE run_id = ? AND attempt < ?", replaced)
            flips = _flips(cur, fresh)
            cur.many(UPSERT_RUN, [(*h.run_values()[:-2], *flips[h.run.run_id]) for h in fresh])
            cur.many(UPSERT_STEP, [v for h in fresh for v in h.step_values()])
            cur.many(UPSERT_HIST, _merged(cur, delta))

    def prune(self, before: float) -> int:
        """Whole days: what ended before the UTC day `before` falls in."""
        cutoff = hist.day_of(before)
        deleted = 0
        while True:
            with self.db.transaction() as cur:
                ids = cur.fetch(
                    "SELECT run_id FROM runs WHERE finished_at < ? ORDER BY finished_at LIMIT ?",
                    (cutoff, PRUNE_SLICE),
                )
                cur.many("DELETE FROM steps WHERE run_id = ?", ids)
                cur.many("DELETE FROM runs WHERE run_id = ?", ids)
                cur.run("DELETE FROM step_hist WHERE day < ?", (cutoff,))
            deleted += len(ids)
            if len(ids) < PRUNE_SLICE:
                return deleted

    def pass_rates(self, since: float, until: float) -> list[PassRate]:
        return queries.pass_rates(self.db, since, until)

    def step_times(self, since: float, until: float, *, bucket_s: int) -> list[StepTime]:
        return queries.step_times(self.db, since, until, bucket_s=bucket_s)

    def outliers(self, since: float, until: float, *, min_runs: int = 10) -> list[Outlier]:
        return queries.outliers(self.db, since, until, min_runs=min_runs)

    def costs(self, since: float, until: float, *, bucket_s: int) -> list[Cost]:
        return queries.costs(self.db, since, until, bucket_s=bucket_s)

    def close(self) -> None:
        self.db.close()
