"""The run list: newest first, filtered, a page at a time (`GET /v1/runs`, `goalfleet runs`).

Every run is in `{p}:runs` by submit time (written with the run, `lua/submit_one.lua` and
`RunQueue.create`), and a run that ended is also in `{p}:runs:<status>` (`lua/lib/run_ended.lua`).
A filter on an end status reads that index; a filter on `queued`, `running` or
`awaiting_answer` reads the all-runs index and keeps what matches. Other filters (device,
batch, goal words, schedule) are checked on the records, a bounded number of index entries a
page (`MAX_SCAN`): a page may hold fewer runs than asked for, and its cursor goes on from where
the scan stopped. An entry whose run is past its retention (its record expired) is dropped from
the index when a page meets it.

The cursor is the last entry's `id@score`: the next page reads from that score down, skipping
the entries of that score already shown (Redis orders equal scores by id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

import redis

from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.fleet.keys import Keys

MAX_LIMIT = 200
"""The most runs a page holds."""
MAX_SCAN = 5000
"""The most index entries one page reads (a filter that matches little pages on, by cursor)."""
_CHUNK = 250
_ACTIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AWAITING_ANSWER})


@dataclass(frozen=True)
class RunQuery:
    status: RunStatus | None = None
    device: str | None = None
    batch: str | None = None
    schedule: str | None = None
    goal: str | None = None
    """Words the run's goal contains (case-insensitive)."""
    since: float | None = None
    """Submitted at or after this time (epoch seconds)."""
    until: float | None = None
    """Submitted before this time."""
    limit: int = 50
    cursor: str | None = None

    def keeps(self, run: RunRecord) -> bool:
        return (
            (self.status is None or run.status is self.status)
            and (self.device is None or run.device == self.device)
            and (self.batch is None or run.batch == self.batch)
            and (self.schedule is None or run.schedule == self.schedule)
            and (self.goal is None or self.goal.casefold() in run.request.goal.casefold())
        )


@dataclass(frozen=True)
class RunPage:
    runs: list[RunRecord]
    next: str | None
    """The cursor of the next page; None: there is none."""


class LoadMany(Protocol):
    """What `RunList` loads records with (`FleetStore.load_many`)."""

    def __call__(self, run_ids: list[str]) -> list[RunRecord]: ...


class RunList:
    def __init__(self, client: redis.Redis, keys: Keys, load: LoadMany) -> None:
        self.r = client
        self.k = keys
        self.load = load

    def page(self, q: RunQuery) -> RunPage:
        ended = q.status is not None and q.status not in _ACTIVE
        index = self.k.ended(q.status.value) if q.status is not None and ended else self.k.runs
        top, bottom = (q.until, False), q.since
        after = _cursor(q.cursor)
        if after is not None and (top[0] is None or after[1] < top[0]):
            top = (after[1], True)  # at the cursor's score, inclusive: ties are skipped below
        high = "+inf" if top[0] is None else (repr(top[0]) if top[1] else f"({top[0]!r}")
        low = "-inf" if bottom is None else repr(bottom)
        found: list[RunRecord] = []
        offset = scanned = 0
        last: tuple[str, float] | None = None
        while len(found) < q.limit and scanned < MAX_SCAN:
            chunk = cast(
                "list[tuple[str, float]]",
                self.r.zrevrangebyscore(
                    index, high, low, start=offset, num=_CHUNK, withscores=True
                ),
            )
            if not chunk:
                return RunPage(found, None)
            offset += len(chunk)
            scanned += len(chunk)
            if after is not None:  # equal scores come in descending id order: skip those shown
                chunk = [(i, s) for i, s in chunk if not (s == after[1] and i >= after[0])]
            records = {r.id: r for r in self.load([i for i, _ in chunk])}
            gone = [i for i, _ in chunk if i not in records]
            if gone:  # past their retention: the index forgets them
                self.r.zrem(index, *gone)
                offset -= len(gone)
            for rid, score in chunk:
                run = records.get(rid)
                if run is None:
                    continue
                last = (rid, score)
                if q.keeps(run):
                    found.append(run)
                    if len(found) == q.limit:
                        break
        return RunPage(found, None if last is None else f"{last[0]}@{last[1]!r}")


def _cursor(cursor: str | None) -> tuple[str, float] | None:
    if not cursor:
        return None
    rid, sep, score = cursor.rpartition("@")
    try:
        return (rid, float(score)) if sep and rid else None
    except ValueError:
        return None
