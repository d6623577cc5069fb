"""`RedisMemory`: the fleet's shared decision memory (the `DecisionMemory` seam on Redis).

One hash per entry (`{p}:mem:{key}`: the entry as JSON, hits, created and last-used times)
with a TTL that every hit renews, and a set of keys for listing. Writes never overwrite:
`HSETNX` keeps the first of two workers that learned the same entry at once, and both
return cleanly. Nothing in an entry is a value: keys and entries are built from scrubbed
states (see `workers.core.memory`). Connections decode responses (`redis_client`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import cast

import redis

from workers.core.memory import Remembered, normalise_goal
from workers.fleet.keys import Keys
from workers.fleet.state.scripts import Registered, source

_ENTRY, _HITS, _CREATED, _USED = "entry", "hits", "created_at", "last_used_at"

Ride = Callable[[str, str, int], "list[str] | None"]
"""A read of a memory entry (its key, now, its TTL) that rides on a write the run makes anyway:
the entry's hash flat (empty: no entry), or None when nothing rides this time
(`workers.fleet.outbox`)."""


class RedisMemory:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        decider: str,
        ttl_s: int,
        clock: Callable[[], float] = time.time,
        ride: Ride | None = None,
    ) -> None:
        self.client = client
        self.ride = ride
        """How a run's read rides on its step rows' write (None: every read is its own)."""
        self.keys = keys
        self._decider = decider
        self.ttl_s = ttl_s
        self.clock = clock
        self._recall = Registered(source("recall"), client)
        self._overwrite = Registered(source("remember"), client)

    @property
    def decider(self) -> str:
        return self._decider

    # -- the seam ---------------------------------------------------------------------------

    def recall(self, key: str) -> Remembered | None:
        """The entry for `key`, its hit counted and its TTL renewed (`lua/recall.lua`: never
        created), read with the run's waiting step rows when some wait (`ride`)."""
        name, now = self.keys.memory(key), repr(self.clock())
        raw = self.ride(name, now, self.ttl_s) if self.ride is not None else None
        if raw is None:
            raw = self._recall(keys=[name], args=[now, self.ttl_s])
        if not raw:
            return None
        return _entry(dict(zip(raw[::2], raw[1::2], strict=True)))

    def remember(self, entries: Iterable[Remembered]) -> int:
        now = repr(self.clock())
        entries = list(entries)
        if not entries:
            return 0
        pipe = self.client.pipeline(transaction=True)
        for e in entries:
            name = self.keys.memory(e.key)
            body = e.model_dump_json(exclude={"hits", "created_at", "last_used_at"})
            pipe.hsetnx(name, _ENTRY, body)
            pipe.hsetnx(name, _CREATED, now)
            pipe.hsetnx(name, _HITS, 0)
            pipe.hset(name, _USED, now)
            pipe.expire(name, self.ttl_s)
            pipe.sadd(self.keys.memory_index(), e.key)
        replies = pipe.execute()
        return sum(1 for r in replies[::6] if r)

    def overwrite(self, entry: Remembered) -> None:
        """Write `entry` over whatever is there: a person's answer outranks what a decider
        may have remembered for that screen. (An answer's own write is part of the answer's
        transition: `workers.fleet.state.questions`, `lua/answer.lua`.)"""
        self._overwrite(
            keys=[self.keys.memory(entry.key), self.keys.memory_index()],
            args=[entry.key, self.ttl_s, *self.fields(entry)],
        )

    def fields(self, entry: Remembered) -> list[str]:
        """The hash of a new entry, flat (name, value, ...), as `lua/lib/memory.lua`'s
        `overwrite_entry` writes it."""
        now = repr(self.clock())
        body = entry.model_dump_json(exclude={"hits", "created_at", "last_used_at"})
        return [_ENTRY, body, _CREATED, now, _USED, now, _HITS, "0"]

    def invalidate(self, key: str, why: str) -> None:  # noqa: ARG002 - the step row keeps why
        self.forget(key)

    # -- management (CLI and API) ------------------------------------------------------------

    def get(self, key: str) -> Remembered | None:
        raw = cast("dict[str, str]", self.client.hgetall(self.keys.memory(key)))
        return _entry(raw) if raw and _ENTRY in raw else None

    def entries(self, *, goal: str | None = None) -> list[Remembered]:
        """Every live entry (for one goal), most used first; expired keys leave the index."""
        members = cast("set[str]", self.client.smembers(self.keys.memory_index()))
        keys = sorted(members)
        pipe = self.client.pipeline(transaction=False)
        for k in keys:
            pipe.hgetall(self.keys.memory(k))
        out, gone = [], []
        for k, raw in zip(keys, pipe.execute(), strict=True):
            if not raw or _ENTRY not in raw:
                gone.append(k)
                continue
            entry = _entry(raw)
            if goal is None or entry.goal == normalise_goal(goal):
                out.append(entry)
        if gone:
            self.client.srem(self.keys.memory_index(), *gone)
        return sorted(out, key=lambda e: (-e.hits, e.key))

    def forget(self, key: str) -> bool:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.keys.memory(key))
        pipe.srem(self.keys.memory_index(), key)
        deleted, _ = pipe.execute()
        return bool(deleted)

    def forget_many(self, *, goal: str | None = None) -> int:
        """Forget every entry (for one goal); returns how many went."""
        return sum(self.forget(e.key) for e in self.entries(goal=goal))


@functools.lru_cache(maxsize=256)
def _parsed(body: str) -> Remembered:
    """An entry's JSON read once: an entry is written once and never changes (`HSETNX`), and
    a worker meets the same few screens run after run. (`Remembered` is frozen.)"""
    return Remembered.model_validate_json(body)


def _entry(raw: dict[str, str]) -> Remembered:
    entry = _parsed(raw[_ENTRY])
    return entry.model_copy(
        update={
            "hits": int(raw.get(_HITS, "0")),
            "created_at": float(raw.get(_CREATED, "0")),
            "last_used_at": float(raw.get(_USED, "0")),
        }
    )
