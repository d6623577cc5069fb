"""Chaos fixtures (helpers live in `chaoskit`). Every test here is marked `chaos`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.local.redis import LocalRedis


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/chaos/" in str(item.fspath):
            item.add_marker(pytest.mark.chaos)


@pytest.fixture
def aof_redis() -> Iterator[LocalRedis]:
    """A fresh Redis on a random loopback port with AOF on (`appendfsync always`), which a
    test can kill and start again on the same port and directory (the data survives); stopped
    and removed afterwards."""
    server = LocalRedis(appendonly=True, appendfsync="always")
    try:
        server.start(timeout_s=15)
        yield server
    finally:
        server.stop()
