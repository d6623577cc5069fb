"""A real headless desktop, the GTK sign-in app and a real agent-device daemon.

Session scope (`desktop`, `daemon`: tests/conftest.py, shared with tests/contract): one Xvfb +
D-Bus + AT-SPI stack on a random free display, and one daemon with its own state dir and claims
dir. Function scope: a fresh app per test (one app per display), and an `AgentDeviceDevice`
session. Everything is torn down at the end.

These tests do not skip when the stack is missing: they fail and say what to install
(`scripts/setup-linux-target.sh`, `make agent-device`). A skip is not a pass.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ad_support import APP, PASSWORD, App

from workers.core.model import Platform
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.agent_device.wire import SocketTransport
from workers.testing.linux_desktop import LinuxDesktop


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.agent_device)


def wait_until_visible(daemon: DaemonProcess, timeout_s: float = 15.0) -> None:
    """Until a snapshot shows the app (AT-SPI registration lags the window a little)."""
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
            if "Sign in" in labels:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"the app never showed in a snapshot: {reply}")
            time.sleep(0.1)
    finally:
        call("close", {})
        wire.close()


@pytest.fixture
def app(desktop: LinuxDesktop, daemon: DaemonProcess, tmp_path: Path) -> Iterator[App]:
    state_file = tmp_path / "app-state.json"
    proc = desktop.start_app(
        ["/usr/bin/python3", str(APP)],
        extra_env={
            "GTK_SIGNIN_STATE_FILE": str(state_file),
            "GTK_SIGNIN_EXPECTED_PASSWORD_SHA256": hashlib.sha256(PASSWORD.encode()).hexdigest(),
        },
        ready=state_file.exists,
    )
    wait_until_visible(daemon)
    yield App(state_file)
    proc.stop(grace_s=10)


@pytest.fixture(params=["socket", "http"])
def device(
    request: pytest.FixtureRequest, daemon: DaemonProcess, app: App
) -> Iterator[AgentDeviceDevice]:
    dev = AgentDeviceDevice.connect(
        daemon.state_dir, platform=Platform.LINUX, transport=request.param, settle_quiet_ms=200
    )
    yield dev
    dev.close()
