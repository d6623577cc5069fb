"""What the suite tests share (imported by name, as `suitekit`: a conftest's names collide with
tests/fleet's when pytest collects both): the suite fleet's token, secret, workers and flows
file, and the CLI as a user runs it against that fleet."""

from __future__ import annotations

import os
import subprocess
import sys

from scheduler.local.fleet import LocalFleet, SimWorker

TOKEN = "suite-test-token"
SECRET_VALUE = "Suite-s3cret-7731"
WORKERS = [
    SimWorker("ios-signin", "ios", "17.5", "iPhone 15", {"app": "signin"}),
    SimWorker("android-signin", "android", "14", "Pixel 8", {"app": "signin"}, app="signin"),
    SimWorker("ios-flaky", "ios", "17.5", "iPhone 15", {"app": "flaky"}, app="flaky"),
    SimWorker("android-flaky", "android", "14", "Pixel 8", {"app": "flaky"}, app="flaky"),
    *(
        SimWorker(f"{p}-settings-{n}", p, v, m, {"app": "settings"}, app="settings")
        for p, v, m in (("ios", "17.5", "iPhone 15"), ("android", "14", "Pixel 8"))
        for n in (1, 2)
    ),
]
FLOWS = """\
suite: signin-smoke
defaults:
  retries: 2
  done_when: Welcome
  params: {ask_person: false, memory: false}
flows:
  - name: sign-in
    goal: Sign in
    inputs: {email: ada@example.com}
    secrets: {password: env:SUITE_PW}
    matrix: {platform: [ios, android], labels: {app: signin}}
  - name: sign-in-flaky
    goal: Sign in
    inputs: {email: ada@example.com}
    secrets: {password: env:SUITE_PW}
    matrix: {platform: [ios, android], labels: {app: flaky}}
"""


def goalfleet(fleet: LocalFleet, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m scheduler <argv>` in a fresh process, pointed at `fleet`."""
    env = {**os.environ, "GOALFLEET_API_URL": fleet.api_url, "GOALFLEET_API_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "scheduler", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
