"""A third-party app nobody here wrote (issue 42): Debian's `zenity --forms`, a dialog tool whose
entries have no accessible name — each is labelled only by the text to its left, and GTK 3
lists the grid's children last added first, so reading order pairs them wrongly. Driven end
to end through `goalfleet run --device agent-device:linux --decider rules`, as a user would;
the ground truth is what zenity printed on its stdout (what it received), not what we pressed.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ad_support import EMAIL, PASSWORD, wait_until_visible
from clikit import goalfleet

from testing.linux_desktop import LinuxDesktop
from workers.devices.agent_device.daemon import DaemonProcess
from workers.processes import Child

FORM = (
    *("zenity", "--forms", "--title", "Acme", "--text", "Sign in to Acme"),
    *("--add-entry", "E-mail", "--add-password", "Password"),
)


@dataclass
class Dialog:
    proc: Child
    stdout: Path

    def printed(self) -> str:
        return self.stdout.read_text(encoding="utf-8")


@pytest.fixture
def zenity_form(desktop: LinuxDesktop, daemon: DaemonProcess, tmp_path: Path) -> Iterator[Dialog]:
    """The form on the test display, its stdout (what it received) kept apart from GTK's
    warnings on stderr."""
    out = tmp_path / "zenity.out"
    argv = ["/bin/sh", "-c", f"exec {shlex.join(FORM)} > {shlex.quote(str(out))}"]
    proc = desktop.start_app(argv)
    wait_until_visible(daemon, label="OK")
    yield Dialog(proc, out)
    proc.stop(grace_s=5)


def _run(desktop: LinuxDesktop, *args: str) -> tuple[dict[str, Any], str]:
    env = {**desktop.env, "GF_TEST_PW": PASSWORD}
    proc = goalfleet(
        *("run", "--device", "agent-device:linux", "--decider", "rules", "--goal", "Sign in"),
        *args,
        "--json",
        env={**os.environ, **env},
        timeout_s=180,
    )
    return json.loads(proc.stdout), proc.stdout + proc.stderr


def _presses(result: dict[str, Any]) -> list[str]:
    return [
        s["action"]["ref"]
        for s in result["steps"]
        if s["action"] and s["action"]["kind"] == "press"
    ]


def test_zenity_form_gets_each_input_in_its_own_entry(desktop: LinuxDesktop, zenity_form: Dialog):
    """The e-mail goes into the entry "E-mail" labels and the password into the secure one;
    "OK" is pressed once, zenity prints exactly what a person would have typed, and its window
    closing is said as such (not as a broken accessibility stack)."""
    result, output = _run(
        desktop, "--input", f"email={EMAIL}", "--secret", "password=env:GF_TEST_PW"
    )
    assert zenity_form.proc.wait(timeout=10) == 0
    assert zenity_form.printed() == f"{EMAIL}|{PASSWORD}\n"
    fills = {
        s["action"]["input"]
        for s in result["steps"]
        if s["action"] and s["action"]["kind"] == "fill"
    }
    assert fills == {"email", "password"}
    assert len(_presses(result)) == 1
    assert result["status"] == "errored"
    assert result["reason"].startswith("the app's window closed after step 3 (pressed 'OK')")
    assert "DBUS" not in result["reason"]
    assert PASSWORD not in output


def test_zenity_form_without_the_password_is_never_submitted(
    desktop: LinuxDesktop, zenity_form: Dialog
):
    """No password supplied: the run ends `blocked` naming the field, "OK" is never pressed —
    zenity is still open and has printed nothing."""
    result, _ = _run(desktop, "--input", f"email={EMAIL}")
    assert result["status"] == "blocked"
    assert result["reason"] == (
        "this screen asks for 'Password' (the label beside it); no input named password was "
        "supplied"
    )
    assert _presses(result) == []
    assert zenity_form.proc.alive()
    assert zenity_form.printed() == ""
