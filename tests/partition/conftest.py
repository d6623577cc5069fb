"""Partition tests: real network namespaces (root, iproute2). Every test here is marked
`partition`; a machine that cannot make namespaces fails them with what to install (never a
skip)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing.netns import NetLab, missing


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/partition/" in str(item.fspath):
            item.add_marker(pytest.mark.partition)


@pytest.fixture
def lab() -> Iterator[NetLab]:
    """Redis, the control host (API + scheduler) and three worker hosts on one private switch
    (10.213.0.0/24, inside the namespaces only); removed afterwards, also on failure."""
    if why := missing():
        pytest.fail(why)
    with NetLab(["redis", "ctl", "host-a", "host-b", "host-c"]) as net:
        yield net
