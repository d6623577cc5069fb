"""The compose file's goalfleet commands start locally, as written: the history's tables, the
API, the scheduler and the sim workers, with the compose environment — only the Redis URL, the
history database (a scratch one on the machine's PostgreSQL), the listen addresses and ports,
and the metrics directory rewritten to loopback and temporary paths. (Docker itself
is not available here; docs/observability.md says what was not run.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pgkit
import psycopg
import pytest
import yaml

from scheduler.local.redis import LocalRedis, free_port
from workers.processes import Child, spawn, stop_all

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")


def services() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return {n: s for n, s in doc["services"].items() if s.get("image") == "goalfleet:local"}


def expand(value: str) -> str:
    """Compose's `${VAR:-default}` (with no VAR set here: the default)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def rewrite(argv: list[str], ports: dict[str, int]) -> list[str]:
    """0.0.0.0 → 127.0.0.1 and every port option → a free loopback port."""
    out = []
    for i, a in enumerate(argv):
        prev = argv[i - 1] if i else ""
        if a == "0.0.0.0":  # noqa: S104 - the value being replaced
            out.append("127.0.0.1")
        elif prev in {"--port", "--metrics-port"}:
            out.append(str(ports[prev]))
        else:
            out.append(a)
    return out


@pytest.fixture(scope="module")
def history_url() -> Iterator[str]:
    with pgkit.scratch_database() as url:
        yield url


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with LocalRedis() as server:
        yield server.url


def wait_http(url: str, child: Child, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert child.alive(), child.tail()
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"{url} did not answer; {child.tail()}")


def start(argv: list[str], env: dict[str, str], log: Path) -> Child:
    return spawn([sys.executable, "-m", "scheduler", *argv], env=env, log=log, name=argv[0])


@dataclass
class Started:
    name: str
    argv: list[str]
    proc: Child
    log: Path
    url: str | None
    """What answers once it is up (the API's /health, a worker's /metrics)."""
    mpdir: Path | None


def start_service(
    name: str, svc: dict[str, Any], tmp: Path, redis_url: str, history_url: str
) -> Started:
    ports = {"--port": free_port(), "--metrics-port": free_port()}
    argv = rewrite([str(a) for a in svc["command"]], ports)
    env = {k: expand(str(v)) for k, v in svc.get("environment", {}).items()}
    env |= {"GOALFLEET_REDIS_URL": redis_url, "GOALFLEET_KEY_PREFIX": "gfcompose"}
    if "GOALFLEET_DATABASE_URL" in env:
        env["GOALFLEET_DATABASE_URL"] = history_url
    mpdir = None
    if "PROMETHEUS_MULTIPROC_DIR" in env:
        mpdir = tmp / f"mp-{name}"
        mpdir.mkdir()
        env["PROMETHEUS_MULTIPROC_DIR"] = str(mpdir)
    log = tmp / f"{name}.log"
    proc = start(argv, {**os.environ, **env}, log)
    url = None
    if argv[0] == "api":
        url = f"http://127.0.0.1:{ports['--port']}/health"
    elif argv[0] == "worker":
        url = f"http://127.0.0.1:{ports['--metrics-port']}/metrics"
    return Started(name, argv, proc, log, url, mpdir)


def json_lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]


def test_every_compose_command_starts_and_serves(
    tmp_path: Path, redis_url: str, history_url: str
) -> None:
    """`db upgrade` makes the history's tables and exits 0, api answers /health, each worker
    serves /metrics with its worker_info (multiprocess dir from the compose environment), the
    scheduler stays up and stores the run in the history; workers log JSON lines."""
    started: list[Started] = []
    one_shot = [n for n, s in services().items() if s.get("restart") == "on-failure"]
    try:
        for name in one_shot:
            done = start_service(name, services()[name], tmp_path, redis_url, history_url)
            assert done.proc.proc.wait(timeout=60) == 0, done.proc.tail()
        for name, svc in sorted(services().items()):
            if name not in one_shot:
                started.append(start_service(name, svc, tmp_path, redis_url, history_url))
        for s in started:
            if s.url is None:
                continue
            wait_http(s.url, s.proc)
            if s.argv[0] == "worker":
                text = httpx.get(s.url, timeout=5).text
                device = s.argv[s.argv.index("--device") + 1]
                assert f'goalfleet_worker_info{{backend="sim",device="{device}"' in text
                assert s.mpdir is not None
                assert list(s.mpdir.glob("*.db")), "multiprocess files"
        run_id = submit_and_wait(next(s for s in started if s.argv[0] == "api"))
        wait_stored(history_url, run_id)
        for s in started:
            assert s.proc.alive(), f"{s.name} exited: {s.proc.tail()}"
    finally:
        stop_all([s.proc for s in started], grace_s=15)
    assert {s.argv[0] for s in started} == {"api", "scheduler", "worker"}
    for s in started:
        if s.argv[0] == "worker":
            assert any(x.get("event") == "metrics.serving" for x in json_lines(s.log)), s.name
    # one request id from the HTTP request to the worker's run line
    api_log = json_lines(next(s.log for s in started if s.argv[0] == "api"))
    (submitted,) = [x for x in api_log if x.get("event") == "run.submitted"]
    assert submitted["run_id"] == run_id
    assert submitted["request_id"] == REQUEST_ID
    finished = [
        x
        for s in started
        if s.argv[0] == "worker"
        for x in json_lines(s.log)
        if x.get("event") == "run.finished"
    ]
    assert [(x["run_id"], x["request_id"], x["status"]) for x in finished] == [
        (run_id, REQUEST_ID, "done")
    ]


REQUEST_ID = "req-compose-1"


def wait_stored(url: str, run_id: str, timeout_s: float = 30) -> None:
    """The scheduler's history writer stored the run in the compose's history database."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT status FROM runs WHERE run_id = %s", (run_id,)).fetchone()
            if row is not None:
                assert row[0] == "done"
                return
            time.sleep(0.2)
    pytest.fail(f"run {run_id} never reached the history database")


def submit_and_wait(api: Started, timeout_s: float = 60) -> str:
    """Submit a sign-in run the way a client would, with an X-Request-ID; wait until done."""
    assert api.url is not None
    base = api.url.removesuffix("/health")
    token = expand(services()[api.name]["environment"]["GOALFLEET_API_TOKENS"])
    headers = {"Authorization": f"Bearer {token}", "X-Request-ID": REQUEST_ID}
    body = {
        "goal": "Sign in",
        "inputs": {"email": "ada@example.com"},
        "secrets": {"password": {"ref": "env:PASSWORD"}},
        "selector": {"platform": "ios"},
    }
    resp = httpx.post(f"{base}/v1/runs", json=body, headers=headers, timeout=10)
    assert resp.status_code == 201, resp.text
    assert resp.headers["x-request-id"] == REQUEST_ID
    run_id: str = resp.json()["id"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = httpx.get(f"{base}/v1/runs/{run_id}", headers=headers, timeout=5).json()
        if run["status"] not in {"queued", "running"}:
            assert run["status"] == "done", run
            return run_id
        time.sleep(0.3)
    pytest.fail(f"run {run_id} did not finish")


def test_worker_without_a_metrics_dir_reexecs_with_one(tmp_path: Path, redis_url: str) -> None:
    """`goalfleet worker --metrics-port N` without PROMETHEUS_MULTIPROC_DIR re-executes itself
    with a per-device directory, so the pool child's metrics are still exported."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env |= {"GOALFLEET_REDIS_URL": redis_url, "GOALFLEET_KEY_PREFIX": "gfreexec"}
    argv = ["worker", "--device", "reexec-1", "--platform", "ios", "--metrics-port", str(port)]
    log = tmp_path / "worker.log"
    expected = Path(tempfile.gettempdir()) / f"goalfleet-metrics-reexec-1-{port}"
    proc = start(argv, env, log)
    try:
        wait_http(f"http://127.0.0.1:{port}/metrics", proc)
        lines = json_lines(log)
        (serving,) = [x for x in lines if x.get("event") == "metrics.serving"]
        mpdir = Path(serving["multiprocess_dir"])
        assert mpdir == expected
        assert list(mpdir.glob("*.db"))
        assert not [x for x in lines if x.get("event") == "metrics.single_process"]
    finally:
        proc.stop(grace_s=15)
        shutil.rmtree(expected, ignore_errors=True)
