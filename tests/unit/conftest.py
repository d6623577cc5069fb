"""Unit fixtures: a real redis-server of this test module's own, and a client of it whose
database every test starts with empty."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from scheduler.local.redis import LocalRedis
from workers.fleet.connections import redis_client


@pytest.fixture(scope="module")
def redis_server(redis_binary: str) -> Iterator[LocalRedis]:
    with LocalRedis(binary=redis_binary) as server:
        yield server


@pytest.fixture
def client(redis_server: LocalRedis) -> Iterator[redis.Redis]:
    c = redis_client(redis_server.url)
    c.flushdb()
    yield c
    c.close()
