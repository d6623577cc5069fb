"""A suite's fleet: a real redis-server on a random loopback port, the API over real HTTP and
the scheduler in threads (`LocalFleet`), and four real `goalfleet worker` processes: iOS and
Android sim devices of the `signin` app and of the `flaky` app (its first run in a process
meets an outage, every later one signs in)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetkit import quick_settings

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.settings import Settings

TOKEN = "suite-test-token"
SECRET_VALUE = "Suite-s3cret-7731"
WORKERS = [
    SimWorker("ios-signin", "ios", "17.5", "iPhone 15", {"app": "signin"}),
    SimWorker("android-signin", "android", "14", "Pixel 8", {"app": "signin"}, app="signin"),
    SimWorker("ios-flaky", "ios", "17.5", "iPhone 15", {"app": "flaky"}, app="flaky"),
    SimWorker("android-flaky", "android", "14", "Pixel 8", {"app": "flaky"}, app="flaky"),
]
FLOWS = """\
suite: signin-smoke
defaults:
  retries: 2
  done_when: Welcome
  params: {ask_person: false, memory: false}
flows:
  - name: sign-in
    goal: Sign in
    inputs: {email: ada@example.com}
    secrets: {password: env:SUITE_PW}
    matrix: {platform: [ios, android], labels: {app: signin}}
  - name: sign-in-flaky
    goal: Sign in
    inputs: {email: ada@example.com}
    secrets: {password: env:SUITE_PW}
    matrix: {platform: [ios, android], labels: {app: flaky}}
"""


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
