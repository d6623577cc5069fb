"""The fleet under test: a real redis-server on a random loopback port, the API over real
HTTP (uvicorn) and the scheduler in threads, and real `goalfleet worker` processes (prefork,
one per sim device, zero latency unless a test needs a slow one)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import redis
import uvicorn
from fleetkit import quick_settings

from scheduler.api.app import create_app
from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis, free_port
from workers.devices.sim.apps import OTP_CODE
from workers.fleet.connections import redis_client
from workers.settings import Settings

TOKEN = "fleet-test-token"
SECRET_VALUE = "s3cret-Value-9481"
BAD_OTP = "135790"
"""A one-time code the privacy sim app refuses."""
SIGN_IN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:FLEET_PW"}},  # the workers' GOALFLEET_SECRET_FLEET_PW
    "done_when": "Welcome",
}
"""A sign-in run's body on the sim apps (add `device` or `selector`)."""

WORKERS = [
    SimWorker("ios-1", "ios", "17.5", "iPhone 15", {"pool": "a"}),
    SimWorker("ios-2", "ios", "16.4", "iPhone 12", {"pool": "b"}),
    SimWorker("android-1", "android", "14", "Pixel 8", {"pool": "a"}),
    SimWorker("slow-1", "android", "13", "Pixel 6", {"pool": "slow"}, latency_scale=0.4),
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/fleet/" in str(item.fspath):
            item.add_marker(pytest.mark.fleet)


@pytest.fixture(scope="session")
def redis_server(redis_binary: str) -> Iterator[LocalRedis]:
    with LocalRedis(binary=redis_binary) as server:
        yield server


@pytest.fixture
def own_redis(redis_binary: str) -> Iterator[tuple[LocalRedis, redis.Redis]]:
    """A Redis of the test's own (it may fill, flush or stop it) and a client on it."""
    with LocalRedis(binary=redis_binary) as server:
        db = redis_client(server.url)
        try:
            yield server, db
        finally:
            db.close()


@pytest.fixture(scope="session")
def settings(redis_server: LocalRedis) -> Settings:
    return quick_settings(redis_server.url, key_prefix="gft", token=TOKEN, dispatch_interval_s=0.5)


@pytest.fixture(scope="session")
def session_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sessions")


@pytest.fixture(scope="session")
def fleet(
    settings: Settings, session_logs: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalFleet]:
    logs = tmp_path_factory.mktemp("worker-logs")
    workers = [replace(w, session_log=session_logs / f"{w.device}.log") for w in WORKERS]
    env = {
        "GOALFLEET_SECRET_FLEET_PW": SECRET_VALUE,
        "GOALFLEET_SECRET_FLEET_OTP": OTP_CODE,  # the privacy app's one-time code
        "GOALFLEET_SECRET_FLEET_BAD_OTP": BAD_OTP,
    }
    with LocalFleet(settings, log_dir=logs, extra_env=env) as f:
        yield f.start_all(workers, timeout_s=90)


@pytest.fixture
def api(fleet: LocalFleet) -> Iterator[FleetClient]:
    with fleet.client() as c:
        yield c


@pytest.fixture
def http(fleet: LocalFleet) -> Iterator[httpx.Client]:
    """Raw HTTP with the token (for status codes and bodies)."""
    with httpx.Client(
        base_url=fleet.api_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    ) as c:
        yield c


@pytest.fixture
def db(settings: Settings) -> Iterator[redis.Redis]:
    c = redis_client(settings.redis_url)
    yield c
    c.close()


class Served:
    """An app served by uvicorn on a random loopback port in a thread."""

    def __init__(self, app: object) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")  # type: ignore[arg-type]
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    made: list[Served] = []

    class _S(Served):
        def __init__(self, app: object) -> None:
            super().__init__(app)
            made.append(self)

    yield _S
    for s in made:
        s.stop()


def create(settings: Settings, **kw: object) -> object:
    return create_app(settings, **kw)  # type: ignore[arg-type]
