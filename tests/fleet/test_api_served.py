"""The API served by uvicorn's own command (`scheduler.api.served`), as a deployment without
`goalfleet api` runs it: it refuses to start with a `GOALFLEET_SECRET_*` in its environment
(the variable named, never its value), and with the limits `scheduler.api.served` documents
for that command, a head over the cap is refused (400) and the connection closed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import TOKEN

from scheduler.local.redis import LocalRedis, free_port
from workers.processes import spawn

pytestmark = pytest.mark.fleet

MAX_HEAD = 8192
SECRET_VALUE = "served-Secret-9"


def uvicorn_argv(port: int) -> list[str]:
    return [
        sys.executable, "-m", "uvicorn", "--factory", "scheduler.api.served:app",
        "--http", "h11", "--h11-max-incomplete-event-size", str(MAX_HEAD),
        "--limit-concurrency", "64", "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def env(redis_binary: str) -> Iterator[dict[str, str]]:
    with LocalRedis(binary=redis_binary) as own:
        base = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
        yield base | {
            "GOALFLEET_REDIS_URL": own.url,
            "GOALFLEET_KEY_PREFIX": "served",
            "GOALFLEET_API_TOKENS": TOKEN,
        }


def test_it_refuses_to_start_holding_a_secret(env: dict[str, str]) -> None:
    proc = subprocess.run(
        uvicorn_argv(free_port()),
        env=env | {"GOALFLEET_SECRET_SIGNIN_PASSWORD": SECRET_VALUE},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "GOALFLEET_SECRET_SIGNIN_PASSWORD" in proc.stderr
    assert "only workers use secrets" in proc.stderr
    assert SECRET_VALUE not in proc.stderr + proc.stdout


def test_it_serves_with_the_head_cap(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    child = spawn(uvicorn_argv(port), env=env, log=tmp_path / "uvicorn.log")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert child.alive(), (tmp_path / "uvicorn.log").read_text()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"http://127.0.0.1:{port}/v1/devices", headers=auth).status_code == 200
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"GET /v1/devices HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * (4 * MAX_HEAD) + b"\r\n"
            )
            answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    finally:
        child.stop(grace_s=10)
