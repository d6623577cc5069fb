"""run_goal through AgentDeviceDevice against the real daemon and the real GTK app."""

from __future__ import annotations

import logging
import os
import re

from ad_support import EMAIL, PASSWORD, App
from clikit import goalfleet_json
from structlog.testing import capture_logs

from workers.core.loop import run_goal
from workers.core.model import ActionKind, Inputs, Outcome, RunResult, RunStatus
from workers.core.params import RunParams
from workers.decide.rules import RulesDecider
from workers.decide.scripted import ScriptedDecider, fill, press
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice

PINNED = re.compile(r"^@e[0-9]+~s([0-9]+)$")

WELCOME = RunParams(done_when="Welcome")


def inputs() -> Inputs:
    return Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})


def assert_signed_in(result: RunResult, app: App, logs: list[dict[str, object]]) -> None:
    assert result.status is RunStatus.DONE, result.reason
    acted = [s for s in result.steps if s.action is not None]
    assert [s.outcome for s in acted] == [Outcome.ACTED] * len(acted)
    kinds = [s.action.kind for s in acted if s.action]
    assert kinds.count(ActionKind.FILL) == 2
    assert kinds[-1] is ActionKind.PRESS
    for row in acted:
        assert row.action is not None
        m = PINNED.match(row.action.pinned)
        assert m, row.action.pinned
        assert m.group(1) == row.refs_generation  # pinned to the snapshot it was decided on
    pw_row = next(s for s in acted if s.action and s.action.input == "password")
    assert pw_row.action is not None
    assert pw_row.action.shown_value == "**********"
    # the request log: one debug line per device command, mutations with pinned refs
    commands = [e for e in logs if e.get("event") == "device_command"]
    mutations = [e for e in commands if e["command"] in {"press", "fill"}]
    assert len(mutations) == len(acted)
    assert all(PINNED.match(str(e["target"])) for e in mutations)
    assert all(e["outcome"] == "ok" and float(str(e["duration_ms"])) > 0 for e in commands)
    # the password is nowhere in what we produced
    assert PASSWORD not in result.model_dump_json()
    assert PASSWORD not in repr(logs)
    # and the app really got there, with the right password
    state = app.state()
    assert state["screen"] == "welcome"
    assert state["email"] == EMAIL
    assert state["password_matches"] is True


def test_scripted_decider_signs_in(
    device: AgentDeviceDevice, app: App, daemon: DaemonProcess, caplog, capfd
):
    """fill email, fill password (secret), press Sign in, then done_when sees Welcome."""
    caplog.set_level(logging.DEBUG)
    decider = ScriptedDecider(
        [fill("Email", "email"), fill("Password", "password"), press("Sign in")]
    )
    with capture_logs() as logs:
        result = run_goal(device, "Sign in", decider=decider, inputs=inputs(), params=WELCOME)
    assert_signed_in(result, app, logs)
    assert result.steps[-1].outcome is Outcome.DONE
    assert len(result.steps) == 4
    out, err = capfd.readouterr()
    assert PASSWORD not in out + err + caplog.text
    # recordAs kept the literal out of agent-device's own state, logs and scripts
    device.close()
    for path in daemon.state_dir.rglob("*"):
        if path.is_file():
            assert PASSWORD not in path.read_text(errors="replace"), path


def test_rules_decider_signs_in(device: AgentDeviceDevice, app: App):
    """The offline rules decider finds the fields, skips "Forgot password?", sees Welcome."""
    with capture_logs() as logs:
        result = run_goal(device, "Sign in", decider=RulesDecider(), inputs=inputs())
    assert_signed_in(result, app, logs)
    assert app.state()["forgot_pressed"] == 0


def test_every_mutation_gets_a_fresh_generation(device: AgentDeviceDevice, app: App):
    """Each settle returns a newer refs generation than the snapshot it was pinned to."""
    snap = device.snapshot()
    email = next(c for c in snap.candidates if c.name == "Email")
    result = device.fill(snap.pin(email.ref), inputs().get("email"))  # type: ignore[arg-type]
    assert result.changed
    assert int(result.refs_generation) > int(snap.refs_generation)
    assert app.state()["screen"] == "signin"


def test_open_device_spec_starts_and_stops_its_own_daemon(desktop, app: App, tmp_path):
    """`agent-device:linux` (what `goalfleet run --device` uses) starts a daemon, drives the
    app, and stops the daemon again on close."""
    from workers.devices.agent_device.host import open_device  # noqa: PLC0415

    dev = open_device("agent-device:linux", env=desktop.env, state_root=tmp_path)
    try:
        assert dev.snapshot().shows("Sign in")
    finally:
        dev.close()
    from workers.devices.agent_device.launch import state_dir_for  # noqa: PLC0415

    state_dir = state_dir_for("agent-device:linux", env=desktop.env, state_root=tmp_path)
    assert not (state_dir / "daemon.json").exists()


def test_goalfleet_run_cli_signs_in_on_the_real_app(desktop, app: App):
    """`goalfleet run --device agent-device:linux` from a shell: done, pinned refs in the JSON
    on stdout (debug device-command logs go to stderr), the password in neither."""
    env = {**os.environ, **desktop.env, "GF_TEST_PW": PASSWORD}
    result, proc = goalfleet_json(
        *("run", "--device", "agent-device:linux", "--goal", "Sign in"),
        *("--input", f"email={EMAIL}", "--secret", "password=env:GF_TEST_PW"),
        *("--loglevel", "DEBUG"),
        env=env,
        timeout_s=180,
    )
    assert result["status"] == "done"
    pinned = [s["action"]["pinned"] for s in result["steps"] if s["action"]]
    assert len(pinned) >= 3
    assert all(PINNED.match(p) for p in pinned)
    assert "device_command" in proc.stderr  # the request log, on stderr
    assert re.search(r"@e[0-9]+~s[0-9]+", proc.stderr)
    assert PASSWORD not in proc.stdout + proc.stderr
    assert app.state()["screen"] == "welcome"
    assert app.state()["password_matches"] is True


def test_goalfleet_run_cli_keeps_pictures_and_a_report_a_browser_opens(desktop, app: App, tmp_path):
    """`goalfleet run --device agent-device:linux … --html r.html`: the app's real pictures,
    one a step, and the video of the app's window in the printed evidence folder, and the
    report opens in chromium with each picture decoded and the video linked; the password is
    in none of it."""
    from browserkit import open_report  # noqa: PLC0415 - the browser tests only

    env = {**os.environ, **desktop.env, "GF_TEST_PW": PASSWORD}
    evidence, html = tmp_path / "evidence", tmp_path / "r.html"
    result, proc = goalfleet_json(
        *("run", "--device", "agent-device:linux", "--goal", "Sign in"),
        *("--input", f"email={EMAIL}", "--secret", "password=env:GF_TEST_PW"),
        *("--evidence", str(evidence), "--html", str(html)),
        env=env,
        timeout_s=180,
    )
    assert result["status"] == "done"
    assert f"evidence: {evidence}" in proc.stderr
    pictures = sorted(evidence.glob("*.png"))
    assert len(pictures) == len(result["steps"]) >= 3
    page = open_report(html)
    assert page.errors == []
    assert page.title == "goalfleet report: Sign in"
    assert "agent-device:linux" in page.texts
    assert len(page.image_widths) == len(pictures)
    assert all(0 < w <= 200 for w in page.image_widths), page.image_widths
    [video] = evidence.glob("*-video.webm")
    assert video.read_bytes()[:4] == b"\x1a\x45\xdf\xa3"  # Matroska/WebM
    assert video.as_uri() in page.linked
    assert "and its video" in proc.stderr
    assert PASSWORD not in html.read_text() + proc.stdout + proc.stderr
