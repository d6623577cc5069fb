"""A clean app for every run on the Linux target: the worker's device host starts the app
command on its display and relaunches it before each run, so two sign-in runs in a row both
start from the app's first screen; with reset `none` the second starts where the first ended
(which is what shows the relaunch is what makes the difference)."""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

import pytest
from ad_support import APP, EMAIL, PASSWORD, daemons_under

from testing.linux_desktop import LinuxDesktop, start_linux_desktop
from workers.core.app import AppConfig, ResetPolicy
from workers.core.loop import run_goal
from workers.core.model import Inputs, RunResult, RunStatus
from workers.core.params import RunParams
from workers.decide.rules import RulesDecider
from workers.devices.agent_device.host import AgentDeviceHost

WELCOME = RunParams(done_when="Welcome")


def app_command(state_file: Path, name: str) -> str:
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    return shlex.join(
        [
            "/usr/bin/env",
            f"GTK_SIGNIN_STATE_FILE={state_file}",
            f"GTK_SIGNIN_EXPECTED_PASSWORD_SHA256={digest}",
            f"GTK_SIGNIN_NAME={name}",
            "/usr/bin/python3",
            str(APP),
        ]
    )


def sign_in(host: AgentDeviceHost, run_id: str) -> RunResult:
    app = host.prepare(None, None)
    dev = host.open(run_id)
    try:
        result = run_goal(
            dev,
            "Sign in",
            decider=RulesDecider(),
            inputs=Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD}),
            params=WELCOME,
        )
    finally:
        dev.close()
    return result.model_copy(update={"app": app})


@pytest.fixture(scope="module")
def own_desktop(tmp_path_factory: pytest.TempPathFactory):
    """A display of its own: this module's hosts start their app on it."""
    with start_linux_desktop(tmp_path_factory.mktemp("reset-desk")) as desk:
        yield desk


@pytest.mark.parametrize("reset", [ResetPolicy.RELAUNCH, ResetPolicy.CLEAR_STATE])
def test_two_runs_in_a_row_both_start_from_the_first_screen(
    own_desktop: LinuxDesktop, tmp_path: Path, reset: ResetPolicy
):
    """Run 1 signs in (the app ends on Welcome); run 2 on the same device starts on the sign-in
    screen again, in a new app process, and signs in too. Each result names the app."""
    state = tmp_path / "app-state.json"
    served = AppConfig(id="signin", command=app_command(state, "Reset"), version="1", reset=reset)
    host = AgentDeviceHost(
        "agent-device:linux", app=served, env=own_desktop.env, state_root=tmp_path
    )
    try:
        pids, results = [], []
        for n in (1, 2):
            result = sign_in(host, f"run-{n}")
            results.append(result)
            pids.append(json.loads(state.read_text())["pid"])
            assert result.status is RunStatus.DONE, result.reason
        for result in results:
            first = result.steps[0]
            assert first.seen is not None  # the first step decided on the sign-in screen
            assert "Sign in" in [c.name for c in first.seen.candidates]
            assert "About Reset" in [c.name for c in first.seen.candidates]
            assert result.app is not None
            assert (result.app.id, result.app.version, result.app.reset) == ("signin", "1", reset)
        assert pids[0] != pids[1]
        assert host.linux_app is not None
        assert host.linux_app.launches == 2
        assert host.keeper.started == 1  # one daemon for both runs
    finally:
        host.close()
    assert daemons_under(tmp_path) == []


def test_with_reset_none_the_second_run_starts_where_the_first_ended(
    own_desktop: LinuxDesktop, tmp_path: Path
):
    """The same two runs with `none`: the app is started once, and run 2's first snapshot is
    already Welcome (done at step 1, nothing decided)."""
    state = tmp_path / "app-state.json"
    served = AppConfig(id="signin", command=app_command(state, "Keep"), reset=ResetPolicy.NONE)
    host = AgentDeviceHost(
        "agent-device:linux", app=served, env=own_desktop.env, state_root=tmp_path
    )
    try:
        first = sign_in(host, "run-1")
        assert first.status is RunStatus.DONE, first.reason
        second = sign_in(host, "run-2")
        assert second.status is RunStatus.DONE
        assert len(second.steps) == 1
        assert second.steps[0].seen is None  # done_when saw Welcome at once
        assert host.linux_app is not None
        assert host.linux_app.launches == 1
    finally:
        host.close()
