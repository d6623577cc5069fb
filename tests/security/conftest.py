"""Security fixtures: a real Redis on a random loopback port and the API app in-process (ASGI)
with the real Celery enqueuer, one registered device (a long lease, no worker) so a valid
submit can be placed, and a way to count everything stored or queued."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis
from fastapi import FastAPI
from pydantic import SecretStr

from scheduler.api.app import create_app
from scheduler.local.redis import LocalRedis
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.settings import Settings

TOKEN = "security-test-token"
DEVICE = "sec-1"


@dataclass
class Api:
    app: FastAPI
    settings: Settings
    db: redis.Redis

    def footprint(self) -> tuple[int, ...]:
        """How many keys (but the wrong tokens' counts, `scheduler.api.throttle`: the one
        thing a refused request writes), and the length of every queue-like key: the
        device's Celery queue, Celery's default queue, pending runs and wake-ups."""
        p = self.settings.key_prefix
        counts = f"{Keys(p).auth_failures_all}*"
        return (
            int(self.db.dbsize()) - sum(1 for _ in self.db.scan_iter(match=counts, count=1000)),
            int(self.db.llen(Keys(p).queue(DEVICE))),
            int(self.db.llen(Keys(p).default_queue)),
            int(self.db.zcard(f"{p}:pending")),
            int(self.db.llen(f"{p}:wake")),
        )


@pytest.fixture(scope="session")
def sec_redis(redis_binary: str) -> Iterator[LocalRedis]:
    with LocalRedis(binary=redis_binary) as server:
        yield server


@pytest.fixture(scope="session")
def api(sec_redis: LocalRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    history = tmp_path_factory.mktemp("history") / "history.db"  # the history routes' own
    settings = Settings(
        redis_url=sec_redis.url,
        key_prefix="gfs",
        api_tokens=[SecretStr(TOKEN)],
        max_pending=1000,
        retention_s=3600,
        database_url=SecretStr(f"sqlite:///{history}"),
    )
    db = redis_client(settings.redis_url)
    DeviceRegistry(db, Keys(settings.key_prefix)).register(
        DeviceInfo(id=DEVICE, platform=Platform.IOS, os_version="17.5", labels={"pool": "a"}),
        "w@" + DEVICE,
        lease_s=3600,
    )
    try:
        yield Api(create_app(settings), settings, db)
    finally:
        db.close()
