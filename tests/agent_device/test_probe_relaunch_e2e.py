"""The quarantine probe applies the device's reset policy before it judges (issue 42, item 6):
on the Linux target the worker's app command is relaunched, so a device whose app died is
judged on a fresh one, and a device whose app cannot start fails its probe saying why. (The
probe used to snapshot the desktop as it was: with the app gone, it failed 43 times in 11
minutes and the quarantine never lifted.)"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from ad_support import APP, PASSWORD, daemons_under

from testing.linux_desktop import LinuxDesktop
from workers.core.app import AppConfig
from workers.core.errors import ConfigError, EmptySnapshotError, FatalDeviceError
from workers.devices.agent_device.launch import state_dir_for
from workers.devices.factory import open_probe_device
from workers.processes import stop_group

SPEC = "agent-device:linux"


@pytest.fixture
def worker_env(
    desktop: LinuxDesktop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """The worker's environment on the test display, its state under a HOME of its own;
    whatever daemon a test leaves there is stopped after."""
    env = {**desktop.env, "HOME": str(tmp_path / "home")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield env
    for pid in daemons_under(tmp_path / "home"):
        stop_group(pid, 5.0)


def _command(state_file: Path) -> str:
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    env = [f"GTK_SIGNIN_STATE_FILE={state_file}", f"GTK_SIGNIN_EXPECTED_PASSWORD_SHA256={digest}"]
    return shlex.join(["/usr/bin/env", *env, "/usr/bin/python3", str(APP)])


def test_the_probe_relaunches_a_dead_app_and_judges_the_fresh_one(
    worker_env: dict[str, str], tmp_path: Path
) -> None:
    """No app on the display (the one under test died): the probe starts the worker's app
    command, its snapshot shows the app, and on close its instance and its daemon stop."""
    state = tmp_path / "app-state.json"
    device = open_probe_device(SPEC, app=AppConfig(command=_command(state)))
    try:
        assert device.snapshot().shows("Sign in")
        assert state.exists()  # the app the probe started
    finally:
        device.close()
    probe_dir = state_dir_for(SPEC, env=worker_env, role="probe")
    assert not (probe_dir / "daemon.json").exists()
    bare = open_probe_device(SPEC)  # no app command: the desktop as it is, now empty again
    try:
        with pytest.raises(EmptySnapshotError):
            bare.snapshot()
    finally:
        bare.close()


@pytest.mark.parametrize(
    ("command", "error", "says"),
    [
        ("/bin/false", FatalDeviceError, "the app '/bin/false' exited with 1"),
        ("/nonexistent/acme-app", ConfigError, "--app-command: '/nonexistent/acme-app' was not"),
    ],
)
def test_an_app_that_cannot_start_fails_the_probe_saying_why(
    worker_env: dict[str, str], command: str, error: type[Exception], says: str
) -> None:
    """The reason the presence logs (`quarantine_probe_failed`) is the app's, and the probe's
    daemon does not outlive the failure."""
    with pytest.raises(error) as failed:
        open_probe_device(SPEC, app=AppConfig(command=command))
    assert str(failed.value).startswith(says)
    assert not (state_dir_for(SPEC, env=worker_env, role="probe") / "daemon.json").exists()
