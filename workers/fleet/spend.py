"""A suite's spending across its runs, in Redis (`workers.core.cost.Ledger`): one hash per batch,
`tokens` and `cost`, added to after each priced call by whichever worker made it and read
before each call (HINCRBY / HINCRBYFLOAT: no read-modify-write between workers). It expires
with the batch (`retention_s` after its last write, as a batch's records)."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from workers.fleet.keys import Keys


@dataclass(frozen=True)
class RedisLedger:
    db: redis.Redis
    key: str
    ttl_s: int

    @classmethod
    def of(cls, db: redis.Redis, keys: Keys, batch_id: str, ttl_s: int) -> RedisLedger:
        return cls(db, keys.batch_spend(batch_id), ttl_s)

    def spent(self) -> tuple[int, float]:
        tokens, cost = self.db.hmget(self.key, ["tokens", "cost"])
        return int(tokens or 0), float(cost or 0.0)

    def add(self, tokens: int, cost: float) -> None:
        pipe = self.db.pipeline(transaction=True)
        pipe.hincrby(self.key, "tokens", tokens)
        pipe.hincrbyfloat(self.key, "cost", cost)
        if self.ttl_s:
            pipe.expire(self.key, self.ttl_s)
        pipe.execute()
