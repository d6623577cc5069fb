"""The device contract's fixtures: the same `contract_device` is a SimDevice or the real
agent-device daemon driving the GTK sign-in app on the session's desktop (`desktop`, `daemon`
in tests/conftest.py; marked `agent_device`; fails, never skips, when the Linux target is not
installed)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.linux_desktop import LinuxDesktop
from workers.core.errors import EmptySnapshotError
from workers.core.model import Platform
from workers.core.ports import DevicePort
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.sim.device import make_sim_device

APP = Path(__file__).resolve().parents[1] / "apps" / "gtk_signin.py"


def _real_device(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DevicePort]:
    desk: LinuxDesktop = request.getfixturevalue("desktop")  # tests/conftest.py
    daemon: DaemonProcess = request.getfixturevalue("daemon")
    state = tmp_path / "app.json"
    app = desk.start_app(
        ["/usr/bin/python3", str(APP)],
        extra_env={"GTK_SIGNIN_STATE_FILE": str(state)},
        ready=state.exists,
    )
    dev = AgentDeviceDevice.connect(daemon.state_dir, platform=Platform.LINUX, settle_quiet_ms=200)
    try:
        deadline = time.monotonic() + 15
        while True:  # AT-SPI registration lags the window a little
            try:
                if dev.snapshot().shows("Sign in"):
                    break
            except EmptySnapshotError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the GTK app never showed up in a snapshot")
            time.sleep(0.1)
        yield dev
    finally:
        dev.close()
        app.terminate()
        app.wait(timeout=10)


@pytest.fixture(
    params=[
        pytest.param("sim", id="sim"),
        pytest.param("agent-device", id="agent-device", marks=pytest.mark.agent_device),
    ]
)
def contract_device(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DevicePort]:
    if request.param == "sim":
        dev = make_sim_device("sim:signin-ios")
        yield dev
        dev.close()
    else:
        yield from _real_device(request, tmp_path)
