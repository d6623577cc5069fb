"""The way to the history database: the outbox in Redis and the writer that drains it.

Every script that ends a run (`workers/fleet/state/lua/lib/run_ended.lua`) adds its id to
`{p}:history:outbox` (scored by end time, ms) while `{p}:history:on` exists, and then leaves
the run's record and step rows without an expiry. `HistoryWriter` keeps that flag alive, reads
the oldest ids in slices, stores them in one transaction (`HistoryStore.write`, idempotent),
then — and only then — gives each run its retention and takes it off the outbox. So:

- a database outage only delays: the slice is not taken off, the writer waits (backoff) and
  stores it again when the database is back; nothing acknowledged is lost, since the outbox
  and the held runs are ordinary Redis keys (AOF keeps them like the runs themselves);
- a writer that dies between the commit and the removal stores the slice again: the upsert
  keys (run; run, attempt, step) make that a no-op;
- the backlog is bounded by what ended during the outage (~1 KiB of Redis a held sign-in run);
  `goalfleet_history_backlog_age_seconds` (the API's metrics) says how far behind the writer is
  and `GoalfleetHistoryBacklog` (deploy/prometheus/alerts.yml) fires on it.

If no writer renews the flag for `hold_s` (the fleet's retention) it lapses: runs end as
before, with their retention, and join no outbox.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import redis
import structlog

from scheduler.store.history.db import HistoryUnavailableError
from scheduler.store.history.rows import RunHistory, history_of
from scheduler.store.history.store import HistoryStore
from scheduler.store.runs import FleetStore
from workers.core.backoff import Backoff
from workers.core.model import StepRow
from workers.core.records import DeviceInfo

log = structlog.stdlib.get_logger("goalfleet.history")

SLICE = 500
"""Runs read, stored and acknowledged together."""
PRUNE_EVERY_S = 3600.0


@dataclass(frozen=True)
class Backlog:
    runs: int
    oldest_ms: float | None
    """When the oldest run waiting ended (Unix ms), or None when none waits."""

    def age_s(self, now: float) -> float:
        return 0.0 if self.oldest_ms is None else max(0.0, now - self.oldest_ms / 1000)


def backlog(client: redis.Redis, outbox: str) -> Backlog:
    with client.pipeline(transaction=False) as p:
        p.zcard(outbox)
        p.zrange(outbox, 0, 0, withscores=True)
        n, first = p.execute()
    oldest = cast("list[tuple[str, float]]", first)
    return Backlog(int(n), oldest[0][1] if oldest else None)


class HistoryWriter:
    """Drains the outbox of the fleet `fleet` into `history`."""

    def __init__(
        self,
        fleet: FleetStore,
        history: HistoryStore,
        *,
        retention_s: int,
        history_retention_s: int = 0,
        slice_size: int = SLICE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fleet = fleet
        self.r = fleet.r
        self.k = fleet.k
        self.history = history
        self.retention_s = retention_s
        self.history_retention_s = history_retention_s
        self.slice_size = slice_size
        self.clock = clock
        self.hold_s = retention_s or 7 * 24 * 3600
        self._pruned_at = 0.0

    def turn_on(self) -> None:
        """Ended runs join the outbox from now on (for `hold_s`, renewed by every drain)."""
        self.r.set(self.k.history_on, "1", ex=self.hold_s)

    def backlog(self) -> Backlog:
        return backlog(self.r, self.k.history_outbox)

    def drain_once(self) -> int:
        """Store one slice of the outbox; returns how many runs it took off (0: empty).
        Raises `HistoryUnavailableError` (nothing taken off) when the database is down."""
        self.turn_on()
        ids = self._ids(0)
        if ids:
            self.history.write(self._load(ids))
            self._ack(ids)
        return len(ids)

    def _ids(self, skip: int) -> list[str]:
        """The oldest slice of the outbox after the first `skip` entries."""
        last = skip + self.slice_size - 1
        return cast("list[str]", self.r.zrange(self.k.history_outbox, skip, last))

    def _ack(self, ids: list[str]) -> None:
        """`ids` are stored: they leave the outbox, and their retention starts (the store's
        `release_held`: the one owner of a run's retention is `lua/lib/keep.lua`)."""
        self.fleet.release_held(ids, keep_s=self.retention_s)

    def _load(self, ids: list[str]) -> list[RunHistory]:
        records = {r.id: r for r in self.fleet.load_many(ids)}
        missing = [rid for rid in ids if rid not in records]
        if missing:  # its keys were deleted by hand: nothing left to store
            log.warning("history.run_gone", runs=len(missing), first=missing[0])
        need_steps = [r for r in records.values() if r.result is None]
        devices = sorted({r.device for r in records.values() if r.device})
        with self.r.pipeline(transaction=False) as p:
            for r in need_steps:
                p.hvals(self.k.steps(r.id))
            for d in devices:
                p.hget(self.k.device(d), "info")
            out = p.execute()
        steps = {
            r.id: sorted(
                (StepRow.model_validate_json(v) for v in cast("list[str]", raw)),
                key=lambda s: s.index,
            )
            for r, raw in zip(need_steps, out[: len(need_steps)], strict=True)
        }
        infos = {
            d: DeviceInfo.model_validate_json(raw)
            for d, raw in zip(devices, out[len(need_steps) :], strict=True)
            if raw
        }
        return [
            history_of(
                r,
                r.result.steps if r.result else steps.get(r.id, []),
                infos.get(r.device or ""),
            )
            for r in records.values()
        ]

    def drain(self) -> int:
        """Drain until the outbox is empty; returns the runs stored. (Reading the next slice
        while the last is written measured no faster on 2 cores: docs/benchmarks.md §17.)"""
        total = 0
        while n := self.drain_once():
            total += n
        return total

    def _prune(self) -> None:
        now = self.clock()
        if self.history_retention_s <= 0 or now - self._pruned_at < PRUNE_EVERY_S:
            return
        deleted = self.history.prune(now - self.history_retention_s)
        self._pruned_at = now
        if deleted:
            log.info("history.pruned", runs=deleted)

    def loop(self, stop: threading.Event, *, idle_s: float = 0.5) -> None:
        """Drain until `stop` is set; a database or Redis outage is waited out with backoff."""
        backoff = Backoff(base_s=0.2, cap_s=5.0)
        failures = 0
        while not stop.is_set():
            try:
                self.drain()
                self._prune()
            except (HistoryUnavailableError, redis.ConnectionError, redis.TimeoutError) as exc:
                failures += 1
                if failures == 1:
                    log.warning("history.write_failed", error=str(exc))
                stop.wait(backoff.delay(failures))
                continue
            if failures:
                log.info("history.write_resumed", after_failures=failures)
                failures = 0
            stop.wait(idle_s)  # the outbox was empty a moment ago
