"""The history store seam (`HistoryStore`) and its one implementation over SQL
(`SqlHistory`: PostgreSQL for a fleet, SQLite embedded for `goalfleet run` and the demo).

Writes are idempotent upserts: a run by its id, a step by (run, attempt, step). A writer that
stored a batch and died before it said so stores it again and nothing is there twice. A run
whose attempt grew since it was stored (a person's answer re-queued it) replaces its steps.

Retention is by time, not partitions: `prune(before)` deletes runs and steps that ended before
it through the end-time indexes, in bounded slices. Why not partitions: the same schema and
code serve SQLite, and at the sizes measured (docs/benchmarks.md: 1,000,000 steps) the
window's index answers in milliseconds; a farm past ~10^8 steps would partition `steps` by
month in PostgreSQL and drop whole months instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from scheduler.store.history import queries
from scheduler.store.history.db import Database
from scheduler.store.history.queries import Outlier, PassRate, StepTime
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
            ids = [(h.run.run_id, h.run.attempt) for h in runs]
            # a run stored at an earlier attempt keeps no step of it
            cur.many("DELETE FROM steps WHERE run_id = ? AND attempt < ?", ids)
            cur.many(UPSERT_RUN, [h.run_values() for h in runs])
            cur.many(UPSERT_STEP, [v for h in runs for v in h.step_values()])

    def prune(self, before: float) -> int:
        deleted = 0
        while True:
            with self.db.transaction() as cur:
                ids = cur.fetch(
                    "SELECT run_id FROM runs WHERE finished_at < ? ORDER BY finished_at LIMIT ?",
                    (before, PRUNE_SLICE),
                )
                cur.many("DELETE FROM steps WHERE run_id = ?", ids)
                cur.many("DELETE FROM runs WHERE run_id = ?", ids)
            deleted += len(ids)
            if len(ids) < PRUNE_SLICE:
                return deleted

    def pass_rates(self, since: float, until: float) -> list[PassRate]:
        return queries.pass_rates(self.db, since, until)

    def step_times(self, since: float, until: float, *, bucket_s: int) -> list[StepTime]:
        return queries.step_times(self.db, since, until, bucket_s=bucket_s)

    def outliers(self, since: float, until: float, *, min_runs: int = 10) -> list[Outlier]:
        return queries.outliers(self.db, since, until, min_runs=min_runs)

    def close(self) -> None:
        self.db.close()
