"""How several scheduler processes split placement: each holds a membership in
`{p}:schedulers` (a sorted set scored by when it lapses, renewed every third of `lease_s`),
and its share is its rank `i` among the `n` live members.

A pass first places the pending runs whose id hashes to `i` (crc32 modulo `n`) on the idle
devices whose id hashes to `i`, so concurrent passes of different schedulers take different
runs to different devices and rarely collide; then it places others' runs on its devices
still idle, so a run never waits for a scheduler that died: a dead member's share is taken by
the others' second walk at once, and by their first walk once its membership lapses
(`lease_s`). The split is by id, not by position in the pending index: positions shift as the
other schedulers take runs out of it, and two schedulers then took the same runs.

The share is a split of work, never a lock: the reservation script (`lua/reserve.lua`) is
what forbids double placement, so a stale share costs a refused reservation, never a wrong
one. A share is re-read a third of a lease after it was last read, so a scheduler that was
alone keeps placing as if it were for up to that long after another joins.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Callable
from typing import cast

import redis

LEASE_S = 3.0
"""How long a scheduler's membership lasts unrenewed (its share moves to the others then)."""


class Shares:
    def __init__(
        self,
        client: redis.Redis,
        key: str,
        *,
        lease_s: float = LEASE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.r = client
        self.key = key
        self.me = uuid.uuid4().hex
        self.lease_s = lease_s
        self.clock = clock
        self._renewed_at = float("-inf")
        self._share = (0, 1)

    def current(self) -> tuple[int, int]:
        """(my rank, live members), renewing the membership when a third of it has passed."""
        now = self.clock()
        if now - self._renewed_at >= self.lease_s / 3:
            with self.r.pipeline(transaction=False) as p:
                p.zadd(self.key, {self.me: now + self.lease_s})
                p.zremrangebyscore(self.key, "-inf", now)
                p.zrange(self.key, 0, -1)
                members = sorted(cast("list[str]", p.execute()[2]))  # a stable rank
            self._renewed_at = now
            self._share = (members.index(self.me), len(members)) if self.me in members else (0, 1)
        return self._share

    def leave(self) -> None:
        """Hand the share over at once (a clean stop)."""
        self.r.zrem(self.key, self.me)


def mine(item_id: str, share: tuple[int, int]) -> bool:
    """Whether a device's or a run's id is in `share`'s part of them."""
    i, n = share
    return n == 1 or zlib.crc32(item_id.encode()) % n == i
