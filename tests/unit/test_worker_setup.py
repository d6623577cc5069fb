"""`goalfleet worker` checks its set-up before it registers: a worker that cannot serve its
device, its deciders or its secrets on this host exits 3 with one line naming what is missing
and the fix in goalfleet's terms, and has written nothing to Redis (a real redis-server of this
module's own, which a worker with its set-up right does write to: the control case).

Each case is the whole command as a process, with the environment it describes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from scheduler.local.redis import LocalRedis

pytestmark = pytest.mark.slow  # whole processes: make test, not make unit

UNSET = ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "OPENAI_API_KEY", "ANDROID_HOME", "WAYLAND_DISPLAY")


def worker_env(redis_server: LocalRedis, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_") and k not in UNSET}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return env | {"GOALFLEET_REDIS_URL": redis_server.url, "HOME": str(home)} | extra


def worker(*args: str) -> list[str]:
    return [sys.executable, "-m", "scheduler", "worker", *args]


CASES = {
    "ios-on-linux": (
        ["--device", "ios-1", "--platform", "ios", "--backend", "agent-device"],
        {},
        (
            "goalfleet worker: ios:ios-1: iOS simulators and devices are driven through Xcode, on "
            "a macOS host; this host runs linux (run it on a Mac"
        ),
    ),
    "android-without-adb": (
        ["--device", "emulator-5554", "--platform", "android", "--backend", "agent-device"],
        {"PATH": "/nonexistent"},
        (
            "goalfleet worker: android:emulator-5554: adb is not on PATH nor under $ANDROID_HOME/"
            "platform-tools or ~/Android/Sdk/platform-tools (install Android platform-tools"
        ),
    ),
    "linux-without-display": (
        ["--device", "gtk-1", "--platform", "linux", "--backend", "agent-device"],
        {},
        "goalfleet worker: agent-device:linux: DISPLAY is not set;",
    ),
    "decider-without-key": (
        ["--device", "ios-1", "--platform", "ios", "--decider", "openai/gpt-4o-mini"],
        {},
        (
            "goalfleet worker: this worker is to serve decider openai/gpt-4o-mini but cannot build "
            "it: "
        ),
    ),
    "secret-not-held": (
        ["--device", "ios-1", "--platform", "ios", "--secret", "GF_PW"],
        {},
        (
            "goalfleet worker: this worker is to hold secret GF_PW, but GOALFLEET_SECRET_GF_PW is "
            "not set in its environment (export GOALFLEET_SECRET_GF_PW before goalfleet worker)"
        ),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_worker_missing_its_setup_exits_3_before_registering(
    name: str, redis_server: LocalRedis, client: redis.Redis, tmp_path: Path
):
    args, extra, line = CASES[name]
    done = subprocess.run(
        worker(*args),
        env=worker_env(redis_server, tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(line), lines[0]
    assert "run devices" not in lines[0]  # agent-device's advice, not ours
    assert client.keys("*") == []  # nothing registered, no timings published


def test_the_same_worker_with_its_setup_right_registers(
    redis_server: LocalRedis, client: redis.Redis, tmp_path: Path
):
    """The control: with GOALFLEET_SECRET_GF_PW set, the worker of `secret-not-held` starts
    and writes its registration to this Redis (so an empty Redis above means something)."""
    args, _, _ = CASES["secret-not-held"]
    env = worker_env(redis_server, tmp_path, GOALFLEET_SECRET_GF_PW="x")
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen(worker(*args), env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not any("ios-1" in k for k in client.keys("*")):
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
