"""The run list: newest first, filtered, a page at a time (`GET /v1/runs`, `goalfleet runs`).

Every run is in `{p}:runs` by submit time (written with the run, `lua/submit_one.lua` and
`RunQueue.create`), and a run that ended is also in `{p}:runs:<status>` (`lua/lib/run_ended.lua`).
A filter on an end status reads that index; a filter on `queued`, `running` or
`awaiting_answer` reads the all-runs index and keeps what matches. Other filters (device,
batch, goal words, schedule, owner, suite, flow) are checked on the records, a bounded number
of index entries a page (`MAX_SCAN`): a page may hold fewer runs than asked for, and its cursor
goes on from where the scan stopped. An entry whose run is past its retention (its record
expired) is dropped from the index when a page meets it.

The cursor is the last entry's `id@score`: the next page starts just past that entry's rank
(`ZREVRANK`; runs of one batch share a submit time, and equal scores keep their order), or,
if that run has gone meanwhile, below its score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

import redis

from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.fleet.keys import Keys

"""The most runs a page holds."""
MAX_SCAN = 1000
"""The most index entries one page reads (a filter that matches little pages on, by cursor)."""
_CHUNK = 500
_ACTIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AWAITING_ANSWER})
_FIELDS = ("status", "device", "batch", "schedule", "owner", "suite", "flow")
"""What a page reads of each run it scans; only the runs that pass are loaded whole."""


@dataclass(frozen=True)
class RunQuery:
    status: RunStatus | None = None
    device: str | None = None
    batch: str | None = None
    schedule: str | None = None
    suite: str | None = None
    flow: str | None = None
    goal: str | None = None
    """Words the run's goal contains (case-insensitive)."""
    since: float | None = None
    """Submitted at or after this time (epoch seconds)."""
    until: float | None = None
    """Submitted before this time."""
    limit: int = 50
    cursor: str | None = None
    owner: str | None = None
    """Only the runs this token name submitted (a `submit` token's list sees its own alone)."""

    @property
    def filters(self) -> bool:
        """Whether anything but the index and the time window narrows the list."""
        narrowing = (self.device, self.batch, self.schedule, self.goal, self.owner, self.suite,
                     self.flow)  # fmt: skip
        return any(v is not None for v in narrowing) or self.status in _ACTIVE

    def keeps(self, fields: list[str | None]) -> bool:
        """Whether a run whose `_FIELDS` read so passes every filter but the goal's."""
        status, device, batch, schedule, owner, suite, flow = fields
        return (
            (self.status is None or status == self.status.value)
            and (self.device is None or device == self.device)
            and (self.batch is None or batch == self.batch)
            and (self.schedule is None or schedule == self.schedule)
            and (self.owner is None or owner == self.owner)
            and (self.suite is None or suite == self.suite)
            and (self.flow is None or flow == self.flow)
        )

    def keeps_goal(self, run: RunRecord) -> bool:
        return self.goal is None or self.goal.casefold() in run.request.goal.casefold()


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
        high = "+inf" if q.until is None else f"({q.until!r}"
        low = "-inf" if q.since is None else repr(q.since)
        high, offset = self._start(index, high, _cursor(q.cursor))
        found: list[RunRecord] = []
        scanned = 0
        last: tuple[str, float] | None = None
        while len(found) < q.limit and scanned < MAX_SCAN:
            want = q.limit - len(found)
            chunk = cast(
                "list[tuple[str, float]]",
                self.r.zrevrangebyscore(
                    index, high, low, start=offset, num=_CHUNK if q.filters else want,
                    withscores=True,
                ),
            )  # fmt: skip
            if not chunk:
                return RunPage(found, None)
            offset += len(chunk)
            scanned += len(chunk)
            kept, gone, last_seen = self._sift(q, chunk, want)
            if gone:  # past their retention: the index forgets them
                self.r.zrem(index, *gone)
                offset -= len(gone)
            found += kept
            last = last_seen or last
        return RunPage(found, None if last is None else f"{last[0]}@{last[1]!r}")

    def _start(self, index: str, high: str, after: tuple[str, float] | None) -> tuple[str, int]:
        """The window's top and the offset in it where the page starts: just past the cursor's
        entry (its rank, less the entries above the window: equal scores keep their order),
        or, when that run has gone meanwhile, below its score."""
        if after is None:
            return high, 0
        rank = cast("int | None", self.r.zrevrank(index, after[0]))
        if rank is None:
            return f"({after[1]!r}", 0
        above = 0 if high == "+inf" else int(self.r.zcount(index, high.replace("(", "", 1), "+inf"))
        return high, max(0, rank + 1 - above)

    def _sift(
        self, q: RunQuery, chunk: list[tuple[str, float]], want: int
    ) -> tuple[list[RunRecord], list[str], tuple[str, float] | None]:
        """Up to `want` runs of `chunk` that pass `q`, the ids whose records are gone, and the
        last entry read (where the next page goes on)."""
        with self.r.pipeline(transaction=False) as p:
            for rid, _ in chunk:
                p.hmget(self.k.run(rid), _FIELDS)
            fields = cast("list[list[str | None]]", p.execute())
        gone = {rid for (rid, _), f in zip(chunk, fields, strict=True) if f[0] is None}
        passing = [rid for (rid, _), f in zip(chunk, fields, strict=True) if f[0] and q.keeps(f)]
        # without a goal filter every one passing is kept: load no more than the page takes
        records = {r.id: r for r in self.load(passing if q.goal else passing[:want])}
        kept: list[RunRecord] = []
        last: tuple[str, float] | None = None
        for rid, score in chunk:
            if rid in gone:
                continue
            last = (rid, score)
            run = records.get(rid)
            if run is not None and q.keeps_goal(run):
                kept.append(run)
                if len(kept) == want:
                    break
        return kept, sorted(gone), last


def _cursor(cursor: str | None) -> tuple[str, float] | None:
    if not cursor:
        return None
    rid, sep, score = cursor.rpartition("@")
    try:
        return (rid, float(score)) if sep and rid else None
    except ValueError:
        return None
