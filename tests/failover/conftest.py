"""Failover tests: a real replicated Redis (master, replica, three sentinels: `SentinelLab`)
under a real fleet. Every test here is marked `failover`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing.sentinels import SentinelLab


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/failover/" in str(item.fspath):
            item.add_marker(pytest.mark.failover)


@pytest.fixture
def lab() -> Iterator[SentinelLab]:
    # down-after 3 s: with 1 s, a master starved of CPU for a second on this 2-core machine
    # (four workers, the API, the scheduler) was judged down too, and a second, spurious
    # failover followed the real one
    with SentinelLab(replicas=2, sentinels=3, down_after_ms=3000) as sentinels:
        yield sentinels
