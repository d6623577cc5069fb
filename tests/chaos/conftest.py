"""Chaos fixtures (helpers live in `chaoskit`). Every test here is marked `chaos`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chaoskit import AofRedis


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/chaos/" in str(item.fspath):
            item.add_marker(pytest.mark.chaos)


@pytest.fixture
def aof_redis() -> Iterator[AofRedis]:
    """A fresh AOF Redis on a random loopback port, killed and removed afterwards."""
    server = AofRedis()
    try:
        server.start()
        yield server
    finally:
        server.stop()
