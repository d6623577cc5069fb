"""Every subcommand, given bad input or a missing service, answers with one line on stderr, the
documented exit code (2 bad input, 3 unavailable, 130 interrupted) and never a traceback.

Each case runs the installed `goalfleet` in a fresh process, as a user would; the processes run
side by side so the whole table costs about one start-up."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scheduler.local.redis import LocalRedis
from workers.core.processes import spawn

NOWHERE_REDIS = "redis://127.0.0.1:1/0"
NOWHERE_API = "http://127.0.0.1:1"
SIGN_IN = ["--goal", "Sign in", "--input", "email=ada@example.com"]

CASES: dict[str, tuple[list[str], int, str]] = {
    # name: (argv after `goalfleet`, exit code, a part of the one line)
    "run-ios-on-linux": (
        ["run", "--device", "ios:00000000-0000-0000-0000-000000000000", *SIGN_IN],
        3,
        "goalfleet run: ",
    ),
    "run-android-without-adb": (
        ["run", "--device", "android:emulator-5554", *SIGN_IN],
        3,
        "goalfleet run: ",
    ),
    "run-bad-spec": (["run", "--device", "usb:1", *SIGN_IN], 2, "not a device spec"),
    "submit-bad-input": (["submit", *SIGN_IN[:2], "--input", "email"], 2, "NAME=VALUE"),
    "submit-no-api": (["submit", *SIGN_IN], 3, "cannot reach the goalfleet API"),
    "status-short-id": (["status", "abc"], 2, "at least 6 characters"),
    "steps-short-id": (["steps", "abc"], 2, "at least 6 characters"),
    "watch-short-id": (["watch", "abc"], 2, "at least 6 characters"),
    "cancel-short-id": (["cancel", "abc"], 2, "at least 6 characters"),
    "answer-short-id": (["answer", "abc", "--done"], 2, "at least 6 characters"),
    "status-no-api": (["status", "630daa7b"], 3, "cannot reach the goalfleet API"),
    "devices-no-api": (["devices"], 3, "cannot reach the goalfleet API"),
    "questions-no-api": (["questions"], 3, "cannot reach the goalfleet API"),
    "memory-no-api": (["memory", "list"], 3, "cannot reach the goalfleet API"),
    "eval-bad-decider": (["eval", "--decider", "magic"], 2, "unknown decider"),
    "demo-bad-runs": (["demo", "--runs", "0"], 2, "--runs must be between"),
    "worker-bad-id": (["worker", "--device", "no spaces", "--platform", "ios"], 2, "--device"),
    "worker-no-redis": (
        ["worker", "--device", "ios-1", "--platform", "ios"],
        3,
        "cannot reach Redis at redis://127.0.0.1:1/0",
    ),
    "scheduler-no-redis": (["scheduler"], 3, "cannot reach Redis at redis://127.0.0.1:1/0"),
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    env |= {
        "GOALFLEET_REDIS_URL": NOWHERE_REDIS,
        "GOALFLEET_API_URL": NOWHERE_API,
        "GOALFLEET_API_TOKEN": "t",
        "GOALFLEET_API_WAIT_S": "0.3",
        "PYTHONUNBUFFERED": "1",
    }
    return env


def _goalfleet(*args: str) -> list[str]:
    return [sys.executable, "-m", "scheduler.cli", *args]


@pytest.fixture(scope="module")
def finished() -> dict[str, subprocess.CompletedProcess[str]]:
    """Every case's finished process, started all at once."""

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            _goalfleet(*argv), env=_env(), capture_output=True, text=True, timeout=60, check=False
        )

    with ThreadPoolExecutor(max_workers=len(CASES)) as pool:  # side by side: ~15 s, not 19x
        futures = {name: pool.submit(run, argv) for name, (argv, _, _) in CASES.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_with_its_exit_code(
    finished: dict[str, subprocess.CompletedProcess[str]], name: str
) -> None:
    """One line on stderr naming the command, the documented exit code, no traceback."""
    _, code, part = CASES[name]
    proc = finished[name]
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"goalfleet {CASES[name][0][0]}"), lines[0]
    assert part in lines[0]
    assert proc.returncode == code, proc.stderr


def test_api_on_a_busy_port_is_one_line(redis_server: LocalRedis) -> None:
    """`goalfleet api --port P` with P taken: one line saying so, exit 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            _goalfleet("api", "--port", str(port)),
            env=_env() | {"GOALFLEET_REDIS_URL": redis_server.url},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"goalfleet api: port {port} on 127.0.0.1 is in use; choose another --port"]
    assert proc.returncode == 3


def test_ctrl_c_during_run_exits_130_without_a_traceback() -> None:
    """SIGINT while a (slow) run is going: one line, exit 130, the device closed."""
    log = Path(tempfile.mkdtemp(prefix="gf-ctrl-c-")) / "run.log"
    proc = spawn(
        _goalfleet("run", "--device", "sim:slow-ios", *SIGN_IN, "--latency-scale", "50"),
        env=_env(),
        log=log,
    )
    time.sleep(3)  # past the imports, into the run
    assert proc.alive(), log.read_text()
    proc.signal(signal.SIGINT)  # as a terminal does: to the whole process group
    proc.wait(timeout=30)
    err = log.read_text()
    assert "Traceback" not in err, err
    assert err.strip().splitlines() == ["goalfleet run: interrupted"]
    assert proc.returncode == 130
