"""Evidence from the screen, not from the chrome, and permission prompts by meaning, on the
real Linux target (issue 42):

- the GTK sign-in app run under a file name holding a consent word (AT-SPI names the
  application after it) signs in and ends `done` with the rules decider — it ended
  `escalated`, "done refused: a consent dialog is in the way", while a copy under another
  name ended `done`;
- GTK's own Yes / No question "Allow Acme to send notifications?" after the sign-in is
  answered No — it was answered Yes (its buttons are not words a permission list holds)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ad_support import APP, EMAIL, PASSWORD, App, start_signin_app

from workers.core.loop import run_goal
from workers.core.model import Inputs, Platform, RunStatus
from workers.decide.rules import RulesDecider
from workers.devices.agent_device import AgentDeviceDevice
from workers.devices.agent_device_daemon import DaemonProcess
from workers.testing.linux_desktop import LinuxDesktop

CHROME_NAME = "cookie_consent_signin.py"
NOTIFY_APP = APP.with_name("gtk_notify.py")


def _device(daemon: DaemonProcess) -> AgentDeviceDevice:
    """A session on the daemon, once the app shows (AT-SPI registration lags the window)."""
    device = AgentDeviceDevice.connect(
        daemon.state_dir, platform=Platform.LINUX, transport="socket", settle_quiet_ms=200
    )
    deadline = time.monotonic() + 15
    while not device.snapshot().shows("Sign in") and time.monotonic() < deadline:
        time.sleep(0.1)
    return device


@pytest.fixture
def renamed_app(desktop: LinuxDesktop, tmp_path: Path) -> Iterator[App]:
    """The sign-in app copied to `CHROME_NAME` and started from there."""
    copy = tmp_path / CHROME_NAME
    shutil.copy(APP, copy)
    proc, started = start_signin_app(desktop, tmp_path, copy)
    yield started
    proc.stop(grace_s=10)


def test_a_consent_word_in_the_application_name_does_not_refuse_done(
    daemon: DaemonProcess, renamed_app: App
) -> None:
    """The snapshot names the application `cookie_consent_signin.py` (chrome); the run signs
    in and ends `done`, and the app really received the email and the password."""
    device = _device(daemon)
    try:
        chrome = [n.label for n in device.snapshot().nodes if n.type == "Application"]
        assert chrome == [CHROME_NAME]  # the name really is in the snapshot
        inputs = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
        result = run_goal(device, "Sign in", decider=RulesDecider(), inputs=inputs)
    finally:
        device.close()
    assert result.status is RunStatus.DONE, result.reason
    state = renamed_app.state()
    assert (state["screen"], state["email"], state["password_matches"]) == ("welcome", EMAIL, True)


@pytest.fixture
def asking_app(desktop: LinuxDesktop, tmp_path: Path) -> Iterator[App]:
    """The sign-in app that asks "Allow Acme to send notifications?" (Yes / No) once signed in."""
    proc, started = start_signin_app(desktop, tmp_path, NOTIFY_APP)
    yield started
    proc.stop(grace_s=10)


def test_a_yes_no_notifications_question_is_answered_no(
    daemon: DaemonProcess, asking_app: App
) -> None:
    """GTK's own question dialog after the sign-in, buttons Yes / No: recognised as a
    permission prompt by what it asks and declined (a sign-in needs no notifications); the run
    ends `done` and the app received "no" (it received "yes")."""
    device = _device(daemon)
    try:
        inputs = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
        result = run_goal(device, "Sign in", decider=RulesDecider(), inputs=inputs)
    finally:
        device.close()
    state = asking_app.state()
    assert (state["screen"], state["password_matches"]) == ("welcome", True)
    assert state["notifications"] == "no", result.reason
    assert result.status is RunStatus.DONE, result.reason
