"""The long-running commands say where they are as they start: `goalfleet api` prints the URL
it listens on (the port it bound, for `--port 0`), Redis without its password and the
version; `goalfleet scheduler` prints a start line too, and both stop cleanly on SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from scheduler.cli._common import shown_url
from scheduler.local.redis import LocalRedis
from workers.processes import Child, spawn


def _start(redis_url: str, *argv: str) -> tuple[Child, str]:
    """Start the command under the supervisor (stderr to its log) and return its first line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    env |= {
        "GOALFLEET_REDIS_URL": redis_url,
        "GOALFLEET_API_TOKENS": "t",
        "GOALFLEET_LOG_FORMAT": "json",
    }
    log = Path(tempfile.mkdtemp(prefix="gf-start-")) / "out.log"
    child = spawn([sys.executable, "-m", "scheduler.cli.main", *argv], env=env, log=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = log.read_text()
        if "\n" in text:
            return child, text.splitlines(keepends=True)[0]
        assert child.alive(), text
        time.sleep(0.05)
    raise AssertionError(f"no start line in 30 s: {log.read_text()!r}")


def _stop(child: Child) -> str:
    child.signal(signal.SIGTERM, leader_only=True)
    child.wait(timeout=30)
    err = child.log.read_text()
    assert "Traceback" not in err, err
    return err


@pytest.mark.slow  # the whole command as a process: make test, not make unit
def test_api_prints_where_it_listens(redis_server: LocalRedis) -> None:
    proc, line = _start(redis_server.url, "api", "--port", "0")
    try:
        found = re.fullmatch(
            r"goalfleet api \S+: listening on http://127\.0\.0\.1:(\d+) "
            r"\(Redis (\S+), key prefix gf; OpenAPI at /docs\)\n",
            line,
        )
        assert found, line
        assert found.group(2) == redis_server.url
        health = httpx.get(f"http://127.0.0.1:{found.group(1)}/health", timeout=10)
        assert health.json()["status"] == "ok"
    finally:
        _stop(proc)
    assert proc.returncode in {0, -signal.SIGTERM}  # uvicorn re-raises the signal it caught


def _children(pid: int, n: int) -> list[int]:
    """The `n` API processes of `pid` (multiprocessing's resource tracker, its child too, is
    left out), once it has started them all."""
    deadline = time.monotonic() + 30
    while True:
        found = [
            c
            for c in (int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
            if b"resource_tracker" not in _cmdline(c)
        ]
        if len(found) >= n or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


@pytest.mark.slow  # the whole command as a process: make test, not make unit
def test_api_processes_each_serve_the_one_socket_and_stop_together(
    redis_server: LocalRedis,
) -> None:
    """`--processes 2`: two processes accept on the one port, each on its own: with
    either frozen (SIGSTOP) the other answers every request; SIGTERM to the command stops both."""
    proc, line = _start(redis_server.url, "api", "--port", "0", "--processes", "2")
    try:
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+) .*; 2 processes\)\n", line)
        assert found, line
        url = f"http://127.0.0.1:{found.group(1)}/v1/devices"
        children = _children(proc.pid, 2)
        assert len(children) == 2, children
        for frozen in children:
            os.kill(frozen, signal.SIGSTOP)
            try:
                for _ in range(4):  # a new connection each: the running process accepts it
                    answer = httpx.get(url, headers={"Authorization": "Bearer t"}, timeout=15)
                    assert answer.status_code == 200, answer.text
            finally:
                os.kill(frozen, signal.SIGCONT)
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err
    assert not _left(children)


def _left(pids: list[int], wait_s: float = 10.0) -> list[int]:
    """Those of `pids` still running `wait_s` after the command exited (uvicorn's processes
    and multiprocessing's resource tracker end within a moment of it)."""
    deadline = time.monotonic() + wait_s
    while any(Path(f"/proc/{c}").exists() for c in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [c for c in pids if Path(f"/proc/{c}").exists()]


def _burst(url: str, stop: threading.Event, tally: list[tuple[float, bool]]) -> None:
    """Requests one after another on one keep-alive client until `stop`: (time, succeeded)."""
    with httpx.Client(headers={"Authorization": "Bearer t"}, timeout=5) as client:
        while not stop.is_set():
            try:
                ok = client.get(url).status_code == 200
            except httpx.HTTPError:
                ok = False
            tally.append((time.monotonic(), ok))


@pytest.mark.slow  # the whole command as a process: make test, not make unit
def test_a_dead_api_process_is_replaced_and_requests_go_on(redis_server: LocalRedis) -> None:
    """`--processes 2`, kill -9 of one process in the middle of a burst of requests from four
    clients: a new process takes its place (uvicorn's supervisor, logged), and at least 99 % of the
    requests of the next 10 s succeed; SIGTERM then stops the command and every process."""
    proc, line = _start(redis_server.url, "api", "--port", "0", "--processes", "2")
    found = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", line)
    assert found, line
    url = f"http://127.0.0.1:{found.group(1)}/v1/devices"
    stop = threading.Event()
    tallies: list[list[tuple[float, bool]]] = [[] for _ in range(4)]
    threads = [threading.Thread(target=_burst, args=(url, stop, t)) for t in tallies]
    try:
        children = _children(proc.pid, 2)
        for t in threads:
            t.start()
        time.sleep(1.0)
        killed = time.monotonic()
        os.kill(children[0], signal.SIGKILL)
        time.sleep(10.0)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        after = _children(proc.pid, 2)
    finally:
        stop.set()
        err = _stop(proc)
    assert proc.returncode == 0, err
    window = [ok for tally in tallies for at, ok in tally if killed <= at <= killed + 10.0]
    rate = sum(window) / len(window)
    print(f"after the kill: {sum(window)}/{len(window)} requests succeeded ({rate:.2%})")  # noqa: T201 - the figure
    assert len(window) > 200, len(window)
    assert rate >= 0.99, rate
    replaced = [c for c in after if c not in children]
    assert children[1] in after, (children, after)
    assert len(replaced) == 1, (children, after)
    assert f"Child process [{children[0]}] died" in err  # uvicorn's supervisor, logged
    assert not _left(after)


@pytest.mark.slow  # the whole command as a process: make test, not make unit
def test_scheduler_prints_a_start_line(redis_server: LocalRedis) -> None:
    proc, line = _start(redis_server.url, "scheduler")
    try:
        assert line.startswith("goalfleet scheduler "), line
        assert f"dispatching runs from Redis {redis_server.url} (key prefix gf)" in line
    finally:
        _stop(proc)
    assert proc.returncode == 0


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:hunter2@10.0.0.5:6379/1", "redis://:***@10.0.0.5:6379/1"),
        ("redis://ada:hunter2@h/0", "redis://ada:***@h/0"),
        ("redis://:@h:6379/0", "redis://h:6379/0"),  # no `:**@` when there is no password
        ("unix:///run/redis.sock", "unix:///run/redis.sock"),
    ],
)
def test_shown_urls_carry_no_password(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@pytest.mark.slow  # the whole command as a process: make test, not make unit
def test_worker_prints_a_start_line_and_no_celery_security_warning(
    redis_server: LocalRedis,
) -> None:
    """One start line naming the device, its latency and Redis; as root, one line of advice
    instead of Celery's eight-line SecurityWarning; no Celery banner (its `Transport://:**@`
    shows a password where there is none)."""
    proc, line = _start(redis_server.url, "worker", "--device", "ios-9", "--platform", "ios")
    try:
        assert line.startswith("goalfleet worker "), line
        assert "device ios-9 (ios, sim:signin-ios), latency scale 0 (no simulated latency" in line
        assert f"on Redis {redis_server.url}" in line
        deadline = time.monotonic() + 60  # until the worker is ready (its banner came before)
        while "worker_ready" not in proc.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        err = _stop(proc)
    seen = err.splitlines()[1:4]
    assert "worker_ready" in err
    assert "SecurityWarning" not in err
    assert "[queues]" not in err  # the banner
    assert ":**@" not in err
    if os.geteuid() == 0:
        assert "running as root" in seen[0]


def test_the_demo_reads_goalfleet_redis_url_and_redis_url_as_its_alias(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One name, as everywhere else; REDIS_URL still works for the demo; neither: its own."""
    from scheduler.cli.demo import given_redis_url  # noqa: PLC0415 - the one function
    from workers.settings import Settings  # noqa: PLC0415

    monkeypatch.delenv("GOALFLEET_REDIS_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert given_redis_url(Settings()) == ("", "")
    monkeypatch.setenv("REDIS_URL", "redis://alias:6379/0")
    assert given_redis_url(Settings()) == ("redis://alias:6379/0", "REDIS_URL")
    monkeypatch.setenv("GOALFLEET_REDIS_URL", "redis://main:6379/0")
    assert given_redis_url(Settings()) == ("redis://main:6379/0", "GOALFLEET_REDIS_URL")
