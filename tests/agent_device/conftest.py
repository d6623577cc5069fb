"""A real headless desktop, the GTK sign-in app and a real agent-device daemon.

Session scope (`desktop`, `daemon`: tests/conftest.py, shared with tests/contract): one Xvfb +
D-Bus + AT-SPI stack on a random free display, and one daemon with its own state dir and claims
dir. Function scope: a fresh app per test (one app per display), and an `AgentDeviceDevice`
session. Everything is torn down at the end.

These tests do not skip when the stack is missing: they fail and say what to install
(`scripts/setup-linux-target.sh`, `make agent-device`). A skip is not a pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ad_support import App, start_signin_app, wait_until_visible

from testing.linux_desktop import LinuxDesktop
from workers.core.model import Platform
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.agent_device)


@pytest.fixture
def app(desktop: LinuxDesktop, daemon: DaemonProcess, tmp_path: Path) -> Iterator[App]:
    proc, started = start_signin_app(desktop, tmp_path)
    wait_until_visible(daemon)
    yield started
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
