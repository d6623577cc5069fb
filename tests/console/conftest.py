"""The console's fleet: its own redis-server, the API (with the console) over real HTTP, the
scheduler, and two sim workers on the `twins` app, with two named tokens and their roles."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from console_kit import ALICE, CHROMIUM, PASSWORD, ROLES, VIEWER
from fleetkit import quick_settings
from pydantic import SecretStr

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis

WORKERS = [
    SimWorker("twin-1", "ios", "17.5", "iPhone 15", app="twins", latency_scale=0.3),
    SimWorker("twin-2", "ios", "17.5", "iPhone 15", app="twins", latency_scale=0.3),
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/console/" in str(item.fspath):
            item.add_marker(pytest.mark.console)


@pytest.fixture(scope="session")
def console_fleet(
    redis_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalFleet]:
    if shutil.which(CHROMIUM) is None:
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (scripts/setup-browser.sh)")
    with LocalRedis(binary=redis_binary) as server:
        settings = quick_settings(
            server.url,
            key_prefix="gfui",
            token=f"{ALICE[0]}:{ALICE[1]}",
            api_tokens=[SecretStr(f"{n}:{t}") for n, t in (ALICE, VIEWER)],
            api_roles=ROLES,
            artifact_dir=tmp_path_factory.mktemp("artifacts"),
        )
        logs = tmp_path_factory.mktemp("console-logs")
        with LocalFleet(
            settings, log_dir=logs, extra_env={"GOALFLEET_SECRET_CONSOLE_PW": PASSWORD}
        ) as f:
            yield f.start_all(WORKERS, timeout_s=90)
