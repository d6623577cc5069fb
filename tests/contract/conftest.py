"""The device contract's fixtures: the same `contract_device` is a SimDevice or the real
agent-device daemon driving the GTK sign-in app (marked `agent_device`; fails, never skips,
when the Linux target is not installed)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.core.errors import EmptySnapshotError
from workers.core.model import Platform
from workers.core.ports import DevicePort
from workers.devices.agent_device import AgentDeviceDevice
from workers.devices.agent_device_daemon import DaemonProcess, start_daemon
from workers.devices.sim import make_sim_device
from workers.testing.linux_desktop import LinuxDesktop, missing_tools, start_linux_desktop

APP = Path(__file__).resolve().parents[1] / "apps" / "gtk_signin.py"


@pytest.fixture(scope="session")
def contract_desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinuxDesktop]:
    if missing_tools():
        pytest.fail(f"the Linux target is not installed: {missing_tools()}")
    desk = start_linux_desktop(tmp_path_factory.mktemp("contract-desk"))
    yield desk
    desk.stop()


@pytest.fixture(scope="session")
def contract_daemon(
    contract_desktop: LinuxDesktop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    state = tmp_path_factory.mktemp("contract-ad")
    proc = start_daemon(state, env=contract_desktop.env, claims_dir=state / "claims")
    yield proc
    proc.stop()


def _real_device(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DevicePort]:
    desk: LinuxDesktop = request.getfixturevalue("contract_desktop")
    daemon: DaemonProcess = request.getfixturevalue("contract_daemon")
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
