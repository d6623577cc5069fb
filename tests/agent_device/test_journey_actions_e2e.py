"""Device actions on the Linux target, proven on a real GTK app (issue 43, item 3): a real
Xvfb + AT-SPI desktop, the real agent-device daemon, and `tests/apps/gtk_list.py` (40 rows in
a scrolled window, a detail page, alt+Left bound to go back). Ground truth is the app's own
state file: how far its list scrolled, which screen it shows, how often it went back. What the
target cannot do (launch, open, submit) is refused before anything is sent."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ad_support import wait_until_visible
from clikit import goalfleet_json

from testing.linux_desktop import LinuxDesktop
from workers.core.journey import run_journey
from workers.core.model import Platform, RunStatus
from workers.core.ports import UnsupportedActionError
from workers.core.request import GoalRunRequest
from workers.decide.rules import RulesDecider
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice

APP = Path(__file__).resolve().parents[2] / "tests" / "apps" / "gtk_list.py"
ROWS_FLOWS = """\
suite: rows
flows:
  - name: row-30
    steps:
      - press: Row 2
      - back
      - scroll: {direction: down, until: Row 30, max: 8}
      - press: Row 30
      - check: '"Details of row 30" is visible'
      - back
      - check: '"Details of row 30" is not visible'
"""


class ListState:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, Any]:
        return json.loads(self.path.read_text(encoding="utf-8"))


@pytest.fixture
def rows_app(desktop: LinuxDesktop, daemon: DaemonProcess, tmp_path: Path) -> Iterator[ListState]:
    state = tmp_path / "list-state.json"
    proc = desktop.start_app(
        ["/usr/bin/python3", str(APP)],
        extra_env={"GTK_LIST_STATE_FILE": str(state)},
        ready=state.exists,
    )
    wait_until_visible(daemon, label="Row 1")
    yield ListState(state)
    proc.stop(grace_s=10)


@pytest.fixture
def linux(daemon: DaemonProcess, rows_app: ListState) -> Iterator[AgentDeviceDevice]:
    dev = AgentDeviceDevice.connect(daemon.state_dir, platform=Platform.LINUX, settle_quiet_ms=200)
    yield dev
    dev.close()


def _until(check: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _pointer_away(desktop: LinuxDesktop) -> None:
    """The pointer to the screen's far corner, away from the app's window."""
    geometry = subprocess.run(
        ["xdotool", "getdisplaygeometry"],
        env=desktop.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout.split()
    width, height = (int(v) - 1 for v in geometry)
    subprocess.run(
        ["xdotool", "mousemove", str(width), str(height)], env=desktop.env, check=True, timeout=10
    )


def test_back_leaves_the_detail_page_and_scroll_moves_the_list_under_the_pointer(
    linux: AgentDeviceDevice, rows_app: ListState, desktop: LinuxDesktop
) -> None:
    """Pressing a row opens its detail page; `back` (alt+Left) brings the list back; `scroll
    down` then scrolls the list (its adjustment moves): agent-device's Linux scroll is xdotool
    wheel clicks where the pointer is, and the press left it over the list. On a window the
    pointer has not been over, the same scroll moves nothing (the last part): the step then
    fails "changed nothing", honestly."""
    _pointer_away(desktop)  # where an earlier test may have left it is not over the list
    snap = linux.snapshot()
    linux.scroll("down")  # the pointer is not over the list
    time.sleep(0.5)
    assert rows_app.read()["scrolled"] == 0
    row = next(c for c in linux.snapshot().candidates if c.name == "Row 2")
    linux.press(linux.snapshot().pin(row.ref))
    assert _until(lambda: rows_app.read()["screen"] == "detail"), rows_app.read()
    linux.snapshot()
    assert linux.back().changed
    assert _until(lambda: rows_app.read()["screen"] == "list"), rows_app.read()
    assert rows_app.read()["backs"] == 1
    before = [c.name for c in linux.snapshot().candidates]
    assert before[0] == "Row 1"
    assert "Row 12" not in before  # AT-SPI reports the rows on screen only
    assert linux.scroll("down").changed
    assert _until(lambda: rows_app.read()["scrolled"] > 0), rows_app.read()
    after = [c.name for c in linux.snapshot().candidates]
    assert "Row 12" in after
    assert "Row 1" not in after
    assert len(snap.candidates) == len(before)


def test_a_journey_on_the_gtk_app_and_what_the_target_refuses(
    linux: AgentDeviceDevice, rows_app: ListState
) -> None:
    """A journey — open a row and go back (the pointer is then over the list), scroll until
    Row 30 is visible, press it, check its page, back, check — runs on the GTK app through
    the real daemon, and the app says it opened row 30 and went back twice; launch, open and
    submit are refused by the Linux device with the reason, nothing sent; a journey needing
    submit is refused before its first step."""
    steps = GoalRunRequest.model_validate(
        {
            "steps": [
                {"press": "Row 2"},
                "back",
                {"scroll": {"direction": "down", "until": "Row 30", "max": 8}},
                {"press": "Row 30"},
                {"check": '"Details of row 30" is visible'},
                "back",
                {"check": '"Details of row 30" is not visible'},
            ]
        }
    ).steps
    result = run_journey(linux, "rows", steps=steps or [], decider=RulesDecider())
    assert result.status is RunStatus.DONE, result.reason
    assert rows_app.read()["opened"] == 30
    assert rows_app.read()["backs"] == 2
    assert result.journey[2].rows > 2  # it scrolled more than once
    for refused in (linux.submit, linux.launch, lambda: linux.open_link("https://x.test")):
        with pytest.raises(UnsupportedActionError):
            refused()
    needs_submit = GoalRunRequest.model_validate({"steps": ["back", "submit"]}).steps or []
    refused_run = run_journey(linux, "rows", steps=needs_submit, decider=RulesDecider())
    assert refused_run.status is RunStatus.ERRORED
    assert "step 2 (2. submit) needs submit" in refused_run.reason
    assert refused_run.steps == ()


def test_the_journey_as_a_flows_file_through_goalfleet_run(
    desktop: LinuxDesktop, rows_app: ListState, tmp_path: Path
) -> None:
    """The user's path: the journey above as a flows file, run by `goalfleet run --device
    agent-device:linux --flows` (the command opens the device itself, as a user runs it):
    done, every row under its step, the scrolls down, the pictures kept, and the app says
    it opened row 30 and went back twice."""
    flows = tmp_path / "flows.yaml"
    flows.write_text(ROWS_FLOWS, encoding="utf-8")
    evidence = tmp_path / "evidence"
    result, _ = goalfleet_json(
        *("run", "--device", "agent-device:linux", "--flows", str(flows)),
        *("--evidence", str(evidence)),
        env={**os.environ, **desktop.env},
        timeout_s=180,
    )
    assert result["status"] == "done", result["reason"]
    assert [j["passed"] for j in result["journey"]] == [True] * 7
    assert {r["journey_step"] for r in result["steps"]} == set(range(1, 8))
    scrolls = [r["action"] for r in result["steps"] if r["journey_step"] == 3 and r["action"]]
    assert scrolls
    assert {a["direction"] for a in scrolls} == {"down"}
    assert rows_app.read()["opened"] == 30
    assert rows_app.read()["backs"] == 2
    assert list(evidence.rglob("*.png")), "the steps' pictures are kept"
