"""Failover tests: a real replicated Redis (master, replica, three sentinels: `SentinelLab`)
under a real fleet. Every test here is marked `failover`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workers.testing.sentinels import SentinelLab


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/failover/" in str(item.fspath):
            item.add_marker(pytest.mark.failover)


@pytest.fixture
def lab() -> Iterator[SentinelLab]:
    with SentinelLab(replicas=2, sentinels=3) as sentinels:
        yield sentinels
