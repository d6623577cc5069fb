"""Every key name and value in a Redis DB, read by type (imported by name, as `redis_values`).

The one way a test looks for something in Redis, e.g. a secret that must not be stored. Never
search `DUMP` output: DUMP compresses values over 20 bytes, so a secret inside a longer JSON
value would not show in it. A key of a type this helper does not know fails the test rather than
being skipped.
"""

from __future__ import annotations

from typing import cast

import redis


def _raw(db: redis.Redis) -> redis.Redis:
    """A client of the same server and DB that answers bytes (`db` may decode)."""
    pool = db.connection_pool
    kwargs = {**pool.connection_kwargs, "decode_responses": False}
    return redis.Redis(connection_pool=redis.ConnectionPool(pool.connection_class, **kwargs))


_READ = {
    "string": lambda db, key: [db.get(key) or b""],
    "hash": lambda db, key: [b for kv in db.hgetall(key).items() for b in kv],
    "list": lambda db, key: db.lrange(key, 0, -1),
    "set": lambda db, key: list(db.smembers(key)),
    "zset": lambda db, key: db.zrange(key, 0, -1),
    "stream": lambda db, key: [b for _, f in db.xrange(key) for kv in f.items() for b in kv],
    "none": lambda _db, _key: [],  # expired between SCAN and TYPE
}
"""How to read every value of a key, by its type."""


def _values(db: redis.Redis, key: bytes) -> list[bytes]:
    kind = cast("bytes", db.type(key)).decode()
    read = _READ.get(kind)
    if read is None:
        raise AssertionError(f"redis_values cannot read {key!r} of type {kind}: teach it that type")
    return cast("list[bytes]", read(db, key))


def redis_values(db: redis.Redis, *, match: str | None = None) -> dict[bytes, list[bytes]]:
    """Each key (matching `match`, default all) and every value it holds: a string's value, a
    hash's fields and values, a list's, set's or sorted set's members, a stream's fields."""
    raw = _raw(db)
    try:
        return {key: _values(raw, key) for key in raw.scan_iter(match=match, count=1000)}
    finally:
        raw.close()


def keys_holding(db: redis.Redis, needle: str | bytes) -> list[str]:
    """The keys whose name or any value contains `needle` (empty: it is stored nowhere)."""
    want = needle.encode() if isinstance(needle, str) else needle
    return sorted(
        key.decode(errors="replace")
        for key, values in redis_values(db).items()
        if want in key or any(want in v for v in values)
    )
