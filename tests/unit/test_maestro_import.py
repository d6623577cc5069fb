"""`goalfleet suite import` (issue 43, item 5): a Maestro flow written from Maestro's
documentation examples (17 different commands, a `runFlow` of a second file) becomes a flows
file with one journey; every command it cannot map is named with its line (in the output's
head and on stderr, exit 1), a folded one noted; and the imported flow runs on the sim."""

from __future__ import annotations

from pathlib import Path

import pytest
from journeykit import PASSWORD

from scheduler.cli.main import main
from scheduler.service.requests import SuiteSubmit
from scheduler.suites.flows import parse
from scheduler.suites.maestro import import_flow
from workers.core.journey import run_journey
from workers.core.model import DecideState, Decision, RunStatus
from workers.core.secrets import DictSecrets, resolve_inputs
from workers.decide.scripted import ScriptedDecider
from workers.devices.sim.device import make_sim_device

FLOW = Path(__file__).resolve().parents[1] / "fixtures" / "maestro" / "dark_mode.yaml"


def test_a_maestro_flow_maps_to_a_journey_and_names_what_it_cannot() -> None:
    """Each mapped command becomes its step (a tapOn + inputText a fill, `${VAR}` a secret, the
    sub-flow inline); hideKeyboard, takeScreenshot and a conditional runFlow are named by file
    and line; eraseText and waitForAnimationToEnd are noted, not dropped silently."""
    imported = import_flow(FLOW)
    steps = imported.flows["flows"][0]["steps"]
    assert steps[:5] == [
        "relaunch",
        {"fill": {"field": "email", "input": "email"}},
        "submit",
        {"fill": {"field": "password", "input": "suite_pw"}},
        "submit",
    ]
    assert {"scroll": {"direction": "down", "until": "Appearance", "max": 10}} in steps
    assert {"check": "The home screen says the theme is dark"} in steps
    assert imported.flows["flows"][0]["secrets"] == {"suite_pw": "env:SUITE_PW"}
    assert [(u.line, u.command) for u in imported.unmapped] == [
        (30, "hideKeyboard"), (31, "takeScreenshot"), (32, "runFlow")
    ]  # fmt: skip
    assert any("sign_in.yaml:line 5: eraseText folded" in n for n in imported.notes)
    assert any("line 21: waitForAnimationToEnd" in n for n in imported.notes)
    assert imported.yaml().startswith("# not mapped: ")


def test_the_imported_flow_runs_on_the_sim() -> None:
    """The flows file it writes validates, and its journey passes on the sim settings app
    (the AI assertion answered by a decider that quotes the screen)."""
    flows = parse(import_flow(FLOW).yaml())
    flow = SuiteSubmit.model_validate(flows.body).flows[0]
    request = flow.goal_request()
    inputs = resolve_inputs(request, DictSecrets({"SUITE_PW": PASSWORD}))

    def quote(state: DecideState) -> Decision:
        return Decision(done=True, reason="it reads 'Theme: Dark'", decided_by="model")

    result = run_journey(
        make_sim_device("sim:settings-android"),
        request.goal,
        steps=request.steps or [],
        decider=ScriptedDecider(quote),
        inputs=inputs,
    )
    assert result.status is RunStatus.DONE, result.reason
    assert len(result.journey) == 18


def test_the_cli_writes_the_file_and_exits_1_on_unmapped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`goalfleet suite import FILE -o OUT`: the file is written, each unmapped command on
    stderr with its line, exit 1; a file that is not a Maestro flow: exit 2, one line."""
    out = tmp_path / "flows.yaml"
    assert main(["suite", "import", str(FLOW), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "dark_mode.yaml:line 30: hideKeyboard: no journey step does this" in err
    assert "18 steps, 3 command(s) not mapped" in err
    assert main(["suite", "validate", str(out)]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("appId: x\n---\nnot: a list\n")
    assert main(["suite", "import", str(bad)]) == 2
    assert "a Maestro flow's commands are a list" in capsys.readouterr().err
