"""Shared constants and helpers of the agent-device end-to-end tests (imported by name, since
`from conftest import ...` is ambiguous once several test dirs have a conftest)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clikit import goalfleet

from testing.linux_desktop import LinuxDesktop
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.wire import SocketTransport
from workers.processes import Child, spawn

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "tests" / "apps" / "gtk_signin.py"
LEFTOVER = Path(__file__).with_name("leftover_owner.py")
EMAIL = "alice@example.com"
PASSWORD = "e2e-" + uuid.uuid4().hex[:12] + "-Pw!"
"""Fresh per test session, so a leak scan cannot pass by luck."""


def sign_in_body(device: str) -> dict[str, Any]:
    """A fleet run's body: sign in to the GTK app on `device`, the password by reference
    (`GOALFLEET_SECRET_GF_PW` on the worker), done when "Welcome" shows."""
    return {
        "goal": "Sign in",
        "device": device,
        "inputs": {"email": EMAIL},
        "secrets": {"password": {"ref": "env:GF_PW"}},
        "done_when": "Welcome",
    }


@dataclass
class App:
    state_file: Path

    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text(encoding="utf-8"))


def start_signin_app(desk: LinuxDesktop, tmp_path: Path, script: Path = APP) -> tuple[Child, App]:
    """The GTK sign-in app (`script`: the repo's, or a copy under another file name) on the
    desktop, expecting `PASSWORD`, its state file in `tmp_path`; up once it wrote it."""
    state_file = tmp_path / "app-state.json"
    proc = desk.start_app(
        ["/usr/bin/python3", str(script)],
        extra_env={
            "GTK_SIGNIN_STATE_FILE": str(state_file),
            "GTK_SIGNIN_EXPECTED_PASSWORD_SHA256": hashlib.sha256(PASSWORD.encode()).hexdigest(),
        },
        ready=state_file.exists,
    )
    return proc, App(state_file)


def daemons_under(root: Path) -> list[int]:
    """Live agent-device daemons (and their helpers) whose state dir is under `root`, found by
    their environment in /proc: what a test must not leave behind."""
    found = []
    wanted = f"AGENT_DEVICE_STATE_DIR={root}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if state != "Z" and any(v.startswith(wanted) for v in env.split(b"\0")):
            found.append(int(proc.name))
    return found


def start_leftover_owner(
    desk: LinuxDesktop, root: Path, log: Path, *, opener: str = "thread", home: Path | None = None
) -> tuple[Child, int]:
    """A process that opened the device (daemon started with state root `root`, session open)
    from a thread or its main thread (`opener`), with the desktop's environment (and `home`);
    alive until killed (`kill_owner`)."""
    env = {**desk.env, "PYTHONPATH": str(REPO)}
    if home is not None:
        env["HOME"] = str(home)
    argv = [sys.executable, str(LEFTOVER), str(root), opener]
    owner = spawn(argv, env=env, log=log, pipe_stdout=True)
    assert owner.proc.stdout is not None
    for raw in owner.proc.stdout:  # structlog's lines, then ours (EOF if it died)
        line = raw.decode(errors="replace").split()
        if line[:1] == ["opened"]:
            return owner, int(line[1])
    raise AssertionError(f"the owner process did not open the device: {owner.tail()}")


def kill_owner(owner: Child) -> None:
    owner.signal(signal.SIGKILL, leader_only=True)
    owner.wait(timeout=10)


def wait_until_visible(
    daemon: DaemonProcess, timeout_s: float = 15.0, *, label: str = "Sign in"
) -> None:
    """Until a snapshot shows `label` (AT-SPI registration lags the window a little)."""
    wire = SocketTransport("127.0.0.1", daemon.info.port)
    token = daemon.info.token.get_secret_value()

    def call(command: str, flags: dict[str, Any]) -> dict[str, Any]:
        body = {
            "session": "probe",
            "command": command,
            "positionals": [],
            "flags": flags,
            "meta": {"requestId": uuid.uuid4().hex},
            "token": token,
        }
        return wire.request(body)

    try:
        call("open", {"platform": "linux"})
        deadline = time.monotonic() + timeout_s
        while True:
            reply = call("snapshot", {"snapshotInteractiveOnly": True})
            labels = [n.get("label") for n in reply.get("data", {}).get("nodes", [])]
            if label in labels:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"the app never showed in a snapshot: {reply}")
            time.sleep(0.1)
    finally:
        call("close", {})
        wire.close()


def run_signin(desktop: LinuxDesktop, *args: str) -> tuple[dict[str, Any], str]:
    """`goalfleet run --device agent-device:linux --decider rules --goal "Sign in" <args>
    --json` on the desktop's display, as a user would (`GF_TEST_PW` holds `PASSWORD`): its
    result and everything it printed."""
    env = {**desktop.env, "GF_TEST_PW": PASSWORD}
    proc = goalfleet(
        *("run", "--device", "agent-device:linux", "--decider", "rules", "--goal", "Sign in"),
        *args,
        "--json",
        env={**os.environ, **env},
        timeout_s=180,
    )
    return json.loads(proc.stdout), proc.stdout + proc.stderr


def acts_of(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The run's actions of one kind (`fill`, `press`), in order."""
    return [s["action"] for s in result["steps"] if s["action"] and s["action"]["kind"] == kind]
