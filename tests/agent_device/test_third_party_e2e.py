"""Third-party apps nobody here wrote (issue 42): Debian's dialog tools, whose entries have no
accessible name — each is labelled only by a text beside it, and GTK 3 lists a grid's
children in an order that pairs them wrongly by reading order (`zenity --forms` and `yad
--form` last added first; `zenity --password` both labels before both entries). Each is
driven end to end through `goalfleet run --device agent-device:linux --decider rules`, as a
user would; the ground truth is what the tool printed on its stdout (what it received), not
what we pressed. And a GTK 4 app whose every node AT-SPI reports disabled: refused honestly,
with the reason.
"""

from __future__ import annotations

import json
import os
import re
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


@dataclass(frozen=True)
class Tool:
    argv: tuple[str, ...]
    identity: str
    """The input name the run supplies for the first entry (its label says which)."""
    printed: str
    """What the tool prints when it gets `{id}` and `{pw}`."""


TOOLS = {
    "zenity-forms": Tool(
        (
            *("zenity", "--forms", "--title", "Acme", "--text", "Sign in to Acme"),
            *("--add-entry", "E-mail", "--add-password", "Password"),
        ),
        "email",
        "{id}|{pw}\n",
    ),
    "zenity-password": Tool(
        ("zenity", "--password", "--username", "--title", "Acme"), "username", "{id}|{pw}\n"
    ),
    "yad-form": Tool(
        (
            *("yad", "--form", "--title", "Acme", "--text", "Sign in to Acme"),
            *("--field", "Username", "--field", "Password:H"),
        ),
        "username",
        "{id}|{pw}|\n",
    ),
}


@dataclass
class Dialog:
    tool: Tool
    proc: Child
    stdout: Path

    def printed(self) -> str:
        return self.stdout.read_text(encoding="utf-8")


@pytest.fixture(params=sorted(TOOLS))
def dialog(
    request: pytest.FixtureRequest, desktop: LinuxDesktop, daemon: DaemonProcess, tmp_path: Path
) -> Iterator[Dialog]:
    """The tool's dialog on the test display, its stdout (what it received) kept apart from
    GTK's warnings on stderr."""
    tool = TOOLS[request.param]
    out = tmp_path / "dialog.out"
    argv = ["/bin/sh", "-c", f"exec {shlex.join(tool.argv)} > {shlex.quote(str(out))}"]
    proc = desktop.start_app(argv)
    wait_until_visible(daemon, label="OK")
    yield Dialog(tool, proc, out)
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


def _acts(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [s["action"] for s in result["steps"] if s["action"] and s["action"]["kind"] == kind]


def test_each_input_lands_in_its_own_entry(desktop: LinuxDesktop, dialog: Dialog) -> None:
    """The identity goes into the entry its label names and the password into the secure
    one; "OK" is pressed once, the tool prints exactly what a person would have typed, and its
    window closing is said as such (not as a broken accessibility stack)."""
    identity = dialog.tool.identity
    result, output = _run(
        desktop, "--input", f"{identity}={EMAIL}", "--secret", "password=env:GF_TEST_PW"
    )
    assert dialog.proc.wait(timeout=10) == 0
    assert dialog.printed() == dialog.tool.printed.format(id=EMAIL, pw=PASSWORD)
    assert {a["input"] for a in _acts(result, "fill")} == {identity, "password"}
    assert len(_acts(result, "press")) == 1
    assert result["status"] == "errored"
    assert result["reason"].startswith("the app's window closed after step 3 (pressed 'OK')")
    assert "DBUS" not in result["reason"]
    assert PASSWORD not in output


def test_without_the_password_nothing_is_submitted(desktop: LinuxDesktop, dialog: Dialog) -> None:
    """No password supplied: the run ends `blocked` naming the field, "OK" is never pressed —
    the tool is still open and has printed nothing."""
    result, _ = _run(desktop, "--input", f"{dialog.tool.identity}={EMAIL}")
    assert result["status"] == "blocked"
    assert result["reason"].startswith("this screen asks for 'Password")
    assert result["reason"].endswith("(the label beside it); no input named password was supplied")
    assert _acts(result, "press") == []
    assert dialog.proc.alive()
    assert dialog.printed() == ""


def test_a_gtk4_app_with_no_enabled_control_says_so(
    desktop: LinuxDesktop, daemon: DaemonProcess
) -> None:
    """Debian's `gtk4-demo-application` (GTK 4.8): over AT-SPI every node it reports is
    disabled. The run ends `blocked` — nothing pressed — and the reason gives the counts and
    what to check, instead of only "no control matches"."""
    proc = desktop.start_app(["gtk4-demo-application"])
    try:
        wait_until_visible(daemon, label="Application Class")
        result, _ = _run(desktop, "--input", f"email={EMAIL}")
    finally:
        proc.stop(grace_s=5)
    assert result["status"] == "blocked"
    assert re.search(
        r"; the accessibility tree has \d+ nodes, [1-9]\d* of them controls, none enabled and "
        r"hittable: the app's toolkit may not report its controls' state",
        result["reason"],
    ), result["reason"]
    assert [s["action"] for s in result["steps"]] == [None]
