"""Every subcommand, given bad input or a missing service, answers with one line on stderr, the
documented exit code (2 bad input, 3 unavailable, 130 interrupted) and never a traceback.

Each case is a process of its own, as a user's command is: one interpreter imports the CLI
(and must print nothing while it does), then forks a child per case that runs `main(argv)` with
its own stdout and stderr files, so the table costs one start-up, not one per case. Ctrl-C and a
busy port run the whole command in a fresh process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from scheduler.local.redis import LocalRedis
from workers.processes import spawn

NOWHERE_REDIS = "redis://127.0.0.1:1/0"
NOWHERE_API = "http://127.0.0.1:1"
SIGN_IN = ["--goal", "Sign in", "--input", "email=ada@example.com"]

CASES: dict[str, tuple[list[str], int, str]] = {
    # name: (argv after `goalfleet`, exit code, a part of the one line)
    "run-ios-on-linux": (
        ["run", "--device", "ios:00000000-0000-0000-0000-000000000000", *SIGN_IN],
        3,
        "iOS simulators and devices are driven through Xcode, on a macOS host",
    ),
    "run-android-without-adb": (
        ["run", "--device", "android:emulator-5554", *SIGN_IN],
        3,
        "goalfleet run: android:emulator-5554: adb ",
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
    "devices-api-without-scheme": (
        ["devices", "--api", "127.0.0.1:8797"],
        2,
        "--api: '127.0.0.1:8797' is not a http:// or https:// URL; give one like http://",
    ),
    "run-memory-not-a-url": (
        ["run", "--device", "sim:signin-ios", *SIGN_IN, "--memory", "localhost:6379"],
        2,
        "--memory: 'localhost:6379' is not a redis://",
    ),
    "eval-bad-decider": (["eval", "--decider", "magic"], 2, "unknown decider"),
    "demo-bad-runs": (["demo", "--runs", "0"], 2, "--runs must be between"),
    "worker-bad-id": (["worker", "--device", "no spaces", "--platform", "ios"], 2, "--device"),
    "worker-no-redis": (
        ["worker", "--device", "ios-1", "--platform", "ios"],
        3,
        "cannot reach Redis at redis://127.0.0.1:1/0",
    ),
    # set-up checked before Redis is even asked (tests/unit/test_worker_setup.py: nothing
    # is written to it)
    "worker-ios-on-linux": (
        ["worker", "--device", "ios-1", "--platform", "ios", "--backend", "agent-device"],
        3,
        "goalfleet worker: ios:ios-1: iOS simulators and devices are driven through Xcode",
    ),
    "worker-android-without-adb": (
        [
            *("worker", "--device", "emulator-5554", "--platform", "android"),
            *("--backend", "agent-device"),
        ],
        3,
        "goalfleet worker: android:emulator-5554: adb ",
    ),
    "worker-secret-not-held": (
        ["worker", "--device", "ios-1", "--platform", "ios", "--secret", "GF_CASE_UNSET"],
        3,
        "GOALFLEET_SECRET_GF_CASE_UNSET is not set in its environment (export",
    ),
    "worker-secret-value": (
        ["worker", "--device", "ios-1", "--platform", "ios", "--secret", "pw=hunter2"],
        2,
        "never the value",
    ),
    "worker-bad-decider": (
        ["worker", "--device", "ios-1", "--platform", "ios", "--decider", "magic"],
        2,
        "--decider: decider 'magic' is not a decider",
    ),
    "worker-control-label": (
        ["worker", "--device", "ios-1", "--platform", "ios", "--label", "pool=a\u202eb"],
        2,
        "--label 'pool': holds a control, bidi or invisible character (U+202E at position 6)",
    ),
    "scheduler-no-redis": (["scheduler"], 3, "cannot reach Redis at redis://127.0.0.1:1/0"),
    "api-no-redis": (["api", "--port", "0"], 3, "cannot reach Redis at redis://127.0.0.1:1/0"),
    "run-bad-decider": (
        ["run", "--device", "sim:signin-ios", *SIGN_IN, "--decider", "magic"],
        2,
        "magic",
    ),
    "run-unknown-provider": (
        ["run", "--device", "sim:signin-ios", *SIGN_IN, "--decider", "nosuch/model"],
        2,
        "Unsupported provider: nosuch",
    ),
    "run-bad-max-steps": (
        ["run", "--device", "sim:signin-ios", *SIGN_IN, "--max-steps", "0"],
        2,
        "--max-steps",
    ),
    "run-secret-value": (
        ["run", "--device", "sim:signin-ios", *SIGN_IN, "--secret", "pw=hunter2"],
        2,
        "env:",
    ),
    "api-bad-port": (["api", "--port", "70000"], 2, "--port 70000"),
    "api-no-processes": (["api", "--processes", "0"], 2, "--processes 0: give 1 to 64"),
    "devices-bad-wait": (["devices", "--wait", "-1"], 2, "--wait"),
    "devices-device-without-wait": (["devices", "--device", "ios-1"], 2, "--wait"),
    "memory-short-key": (["memory", "show", "abc"], 2, "at least 6 characters"),
    "eval-bad-min-accuracy": (["eval", "--min-accuracy", "2"], 2, "--min-accuracy"),
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
    return [sys.executable, "-m", "scheduler.cli.main", *args]


FORKER = """
import json, os, sys, traceback
from scheduler.cli.main import commands, main

commands()  # every command module imported once, here; each case forks from this point
cases, out = json.loads(sys.argv[1]), sys.argv[2]
children = {}
for name, argv in cases.items():
    pid = os.fork()
    if pid == 0:
        for fd, suffix in ((1, "out"), (2, "err")):
            os.dup2(os.open(f"{out}/{name}.{suffix}", os.O_WRONLY | os.O_CREAT, 0o600), fd)
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # what Python would print for an uncaught exception
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    children[pid] = name
codes = {}
for pid, name in children.items():
    codes[name] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(codes))
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """Every case's exit code and stderr, each case a child of one interpreter that imported
    the CLI first; that interpreter's own stderr (the import) must be empty."""
    out = tmp_path_factory.mktemp("cli-cases")
    cases = {name: argv for name, (argv, _, _) in CASES.items()}
    proc = subprocess.run(
        [sys.executable, "-c", FORKER, json.dumps(cases), str(out)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # importing the CLI says nothing
    codes = json.loads(proc.stdout.strip().splitlines()[-1])
    return {name: (codes[name], (out / f"{name}.err").read_text()) for name in CASES}


@pytest.mark.slow  # one interpreter forks a child per case (seconds): make test, not make unit
@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_with_its_exit_code(
    finished: dict[str, tuple[int, str]], name: str
) -> None:
    """One line on stderr naming the command, the documented exit code, no traceback."""
    _, code, part = CASES[name]
    returncode, stderr = finished[name]
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"goalfleet {CASES[name][0][0]}"), lines[0]
    assert part in lines[0]
    assert returncode == code, stderr


@pytest.mark.slow  # the whole command as a process: make test, not make unit
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


NOWHERE_DATABASE = "postgresql://fleet:pw@127.0.0.1:1/history"


@pytest.mark.slow  # the whole command as a process: make test, not make unit
@pytest.mark.parametrize("argv", [["api", "--port", "0"], ["scheduler"]])
def test_a_server_with_its_history_database_down_is_one_line(
    redis_server: LocalRedis, argv: list[str]
) -> None:
    """`goalfleet api` and `goalfleet scheduler` with `GOALFLEET_DATABASE_URL` naming a
    PostgreSQL nobody serves: one line naming the database (its password masked), exit 3,
    before the start line."""
    proc = subprocess.run(
        _goalfleet(*argv),
        env=_env()
        | {"GOALFLEET_REDIS_URL": redis_server.url, "GOALFLEET_DATABASE_URL": NOWHERE_DATABASE},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    lines = proc.stderr.strip().splitlines()
    expected = (
        f"goalfleet {argv[0]}: history database postgresql://fleet:***@127.0.0.1:1/history "
        "unreachable: OperationalError (start it, or check GOALFLEET_DATABASE_URL)"
    )
    assert lines == [expected], proc.stderr
    assert proc.returncode == 3


def _wait_past_start_up(pid: int, timeout_s: float = 60) -> None:
    """Until the interpreter is inside `goalfleet`'s `main` (it has loaded pydantic, which only
    the commands import): a Ctrl-C earlier, during Python's own start-up, is Python's to report."""
    deadline = time.monotonic() + timeout_s
    while "_pydantic_core" not in Path(f"/proc/{pid}/maps").read_text():
        assert time.monotonic() < deadline, "the command did not start in 60 s"
        time.sleep(0.05)


@pytest.mark.slow  # the whole command as a process: make test, not make unit
def test_ctrl_c_during_run_exits_130_without_a_traceback() -> None:
    """SIGINT while a (slow) run is going: one line, exit 130, the device closed."""
    log = Path(tempfile.mkdtemp(prefix="gf-ctrl-c-")) / "run.log"
    proc = spawn(
        _goalfleet("run", "--device", "sim:slow-ios", *SIGN_IN, "--latency-scale", "50"),
        env=_env(),
        log=log,
    )
    _wait_past_start_up(proc.pid)
    time.sleep(2)  # into the run, most likely (a Ctrl-C while the commands load is the same)
    assert proc.alive(), log.read_text()
    proc.signal(signal.SIGINT)  # as a terminal does: to the whole process group
    proc.wait(timeout=30)
    err = log.read_text()
    assert "Traceback" not in err, err
    assert err.strip().splitlines() == ["goalfleet run: interrupted"]
    assert proc.returncode == 130


@pytest.mark.parametrize(
    ("env", "value", "part"),
    [
        ("GOALFLEET_REDIS_URL", "localhost:6379", "is not a redis:// or rediss:// or unix:// URL"),
        ("GOALFLEET_API_URL", "127.0.0.1:8787", "is not a http:// or https:// URL"),
        ("GOALFLEET_API_URL", "http://", "names no host"),
        ("GOALFLEET_MODEL_BASE_URL", "localhost:8080/v1", "is not a http:// or https:// URL"),
    ],
)
def test_every_url_setting_is_checked_with_one_line(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, part: str
) -> None:
    from scheduler.cli._common import load_settings  # noqa: PLC0415 - after the env is set
    from workers.core.errors import ConfigError  # noqa: PLC0415

    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert str(err.value).startswith(f"{env}: {value!r} ")
    assert part in str(err.value)
    assert "\n" not in str(err.value)
