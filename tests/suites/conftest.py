"""A suite's fleet: a real redis-server on a random loopback port, the API over real HTTP and
the scheduler in threads (`LocalFleet`), and eight real `goalfleet worker` processes: iOS and
Android sim devices of the `signin` app and of the `flaky` app (its first run in a process
meets an outage, every later one signs in), and two of each of the `settings` app (journeys)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetkit import quick_settings
from suitekit import FLOWS, SECRET_VALUE, TOKEN, WORKERS

from scheduler.local.fleet import LocalFleet
from scheduler.local.redis import LocalRedis
from workers.settings import Settings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/suites/" in str(item.fspath):
            item.add_marker(pytest.mark.fleet)


@pytest.fixture(scope="session")
def redis_server(redis_binary: str) -> Iterator[LocalRedis]:
    with LocalRedis(binary=redis_binary) as server:
        yield server


@pytest.fixture(scope="session")
def settings(redis_server: LocalRedis) -> Settings:
    return quick_settings(redis_server.url, key_prefix="gfsuite", token=TOKEN)


@pytest.fixture(scope="session")
def fleet(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    logs = tmp_path_factory.mktemp("suite-worker-logs")
    env = {"GOALFLEET_SECRET_SUITE_PW": SECRET_VALUE}
    with LocalFleet(settings, log_dir=logs, extra_env=env) as f:
        yield f.start_all(WORKERS, timeout_s=90)


@pytest.fixture
def flows_file(tmp_path: Path) -> Path:
    path = tmp_path / "flows.yaml"
    path.write_text(FLOWS)
    return path
