"""Remembered actions on the real GTK app, their effect read from re-snapshots instead of a
settle window: a memory-hit run signs in with every step from memory, and a planted entry whose
action changes nothing ("Forgot password?") is still caught and invalidated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ad_support import EMAIL, PASSWORD
from test_app_reset import app_command

from testing.linux_desktop import start_linux_desktop
from workers.core.app import AppConfig, ResetPolicy
from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory, Remembered, Target
from workers.core.model import Inputs, Kind, RunResult, RunStatus
from workers.core.params import RunParams
from workers.decide.rules import RulesDecider
from workers.devices.agent_device.host import AgentDeviceHost

WELCOME = RunParams(done_when="Welcome")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """A display of its own and a host that relaunches the app before each run."""
    base = tmp_path_factory.mktemp("quick")
    with start_linux_desktop(base / "desk") as desk:
        state = base / "app.json"
        served = AppConfig(
            id="signin", command=app_command(state, "Quick"), reset=ResetPolicy.RELAUNCH
        )
        host = AgentDeviceHost("agent-device:linux", app=served, env=desk.env, state_root=base)
        try:
            yield host, state
        finally:
            host.close()


def run(host: AgentDeviceHost, memory: InMemoryMemory) -> RunResult:
    host.prepare(None, None)
    dev = host.open("run")
    try:
        inputs = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
        return run_goal(
            dev, "Sign in", decider=RulesDecider(), inputs=inputs, params=WELCOME, memory=memory
        )
    finally:
        dev.close()


def test_a_memory_hit_run_signs_in_with_every_step_from_memory(lab: tuple[AgentDeviceHost, Path]):
    host, state = lab
    memory = InMemoryMemory(decider="rules")
    assert run(host, memory).status is RunStatus.DONE
    again = run(host, memory)
    assert again.status is RunStatus.DONE, again.reason
    acted = [r for r in again.steps if r.action is not None]
    assert len(acted) == 3
    assert all(r.memory is not None and r.memory.outcome == "hit" for r in acted)
    assert all(r.result is not None and r.result.changed and r.result.settled for r in acted)
    app = json.loads(state.read_text())
    assert app["screen"] == "welcome"
    assert app["password_matches"] is True
    assert memory.invalidated == []


def test_a_remembered_action_that_changes_nothing_is_caught(lab: tuple[AgentDeviceHost, Path]):
    """The sign-in screen's entry swapped for a press of "Forgot password?" (which changes
    nothing on screen): the press is made, its effect check says nothing changed, the entry
    is invalidated, and the decider takes the step over; the run still signs in."""
    host, state = lab
    memory = InMemoryMemory(decider="rules")
    first = run(host, memory)
    assert first.status is RunStatus.DONE
    key = first.steps[0].memory.entry  # type: ignore[union-attr]
    entry = memory.entries[key]
    memory.entries[key] = Remembered(
        key=key, target=Target(kind=Kind.BUTTON, name="Forgot password?"), source=entry.source
    )
    again = run(host, memory)
    assert again.status is RunStatus.DONE, again.reason
    assert memory.invalidated == [(key, "its action changed nothing")]
    assert again.steps[0].memory is not None
    assert again.steps[0].memory.outcome == "invalidated"
    assert json.loads(state.read_text())["forgot_pressed"] == 1
