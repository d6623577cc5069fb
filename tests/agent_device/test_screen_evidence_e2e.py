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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ad_support import APP, EMAIL, PASSWORD, App, start_signin_app

from testing.linux_desktop import LinuxDesktop
from workers.core.loop import run_goal
from workers.core.model import Inputs, Platform, RunResult, RunStatus, Snapshot
from workers.decide.rules import RulesDecider
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.processes import Child

CHROME_NAME = "cookie_consent_signin.py"
NOTIFY_APP = APP.with_name("gtk_notify.py")


@pytest.fixture
def start(desktop: LinuxDesktop, tmp_path: Path) -> Iterator[Callable[[Path], App]]:
    """Starts a GTK sign-in app script on the desktop (one per test); stopped at the end."""
    procs: list[Child] = []

    def started(script: Path) -> App:
        proc, app = start_signin_app(desktop, tmp_path, script)
        procs.append(proc)
        return app

    yield started
    for proc in procs:
        proc.stop(grace_s=10)


def _sign_in(daemon: DaemonProcess) -> tuple[RunResult, Snapshot]:
    """The rules decider's sign-in on the app the daemon sees, once it shows (AT-SPI
    registration lags the window), and the first snapshot."""
    device = AgentDeviceDevice.connect(
        daemon.state_dir, platform=Platform.LINUX, transport="socket", settle_quiet_ms=200
    )
    try:
        deadline = time.monotonic() + 15
        while not (first := device.snapshot()).shows("Sign in") and time.monotonic() < deadline:
            time.sleep(0.1)
        inputs = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
        return run_goal(device, "Sign in", decider=RulesDecider(), inputs=inputs), first
    finally:
        device.close()


def test_a_consent_word_in_the_application_name_does_not_refuse_done(
    daemon: DaemonProcess, start: Callable[[Path], App], tmp_path: Path
) -> None:
    """The snapshot names the application `cookie_consent_signin.py` (chrome); the run signs
    in and ends `done`, and the app really received the email and the password."""
    copy = tmp_path / CHROME_NAME
    shutil.copy(APP, copy)
    app = start(copy)
    result, first = _sign_in(daemon)
    assert [n.label for n in first.nodes if n.type == "Application"] == [CHROME_NAME]
    assert result.status is RunStatus.DONE, result.reason
    state = app.state()
    assert (state["screen"], state["email"], state["password_matches"]) == ("welcome", EMAIL, True)


def test_a_yes_no_notifications_question_is_answered_no(
    daemon: DaemonProcess, start: Callable[[Path], App]
) -> None:
    """GTK's own question dialog after the sign-in, buttons Yes / No: recognised as a
    permission prompt by what it asks and declined (a sign-in needs no notifications); the run
    ends `done` and the app received "no" (it received "yes")."""
    app = start(NOTIFY_APP)
    result, _ = _sign_in(daemon)
    state = app.state()
    assert (state["screen"], state["password_matches"]) == ("welcome", True)
    assert state["notifications"] == "no", result.reason
    assert result.status is RunStatus.DONE, result.reason
