"""The secret-search helper (tests/redis_values.py) finds a value wherever Redis keeps it."""

from __future__ import annotations

import json

import redis
from redis_values import keys_holding, redis_values

NEEDLE = "pw-in-a-long-value-31"


def test_finds_a_needle_in_every_type_and_inside_long_values(client: redis.Redis):
    """A needle inside a long JSON value (one Redis compresses in DUMP), in a hash field or
    value, a list, a set, a sorted set, a stream or a key name is found, through a decoding
    client too; a DB without it gives []."""
    long_json = json.dumps({"steps": [{"note": "x" * 40, "i": i} for i in range(20)] + [NEEDLE]})
    assert keys_holding(client, NEEDLE) == []
    client.set("s", long_json)
    client.hset("h1", "field", long_json)
    client.hset("h2", NEEDLE, "v")
    client.rpush("l", "a", long_json)
    client.sadd("set", long_json)
    client.zadd("z", {long_json: 1.0})
    client.xadd("x", {"k": long_json})
    client.set(f"key:{NEEDLE}", "v")
    client.set("clean", "y" * 500)
    assert keys_holding(client, NEEDLE) == sorted(
        ["s", "h1", "h2", "l", "set", "z", "x", f"key:{NEEDLE}"]
    )
    assert keys_holding(client, NEEDLE.encode()) == keys_holding(client, NEEDLE)
    assert redis_values(client, match="h2") == {b"h2": [NEEDLE.encode(), b"v"]}
