"""`goalfleet run --flows FILE`: one flow of a flows file (a journey or one goal) on one local
device, as a worker runs it (its steps, inputs, secret references resolved from
`GOALFLEET_SECRET_*`, params), with the run flags overriding the flow's; every wrong
combination refused before anything runs, naming the flag and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from journeykit import JOURNEY_YAML, PASSWORD

from scheduler.cli.main import main

SUITE = "suite: settings-journeys\nflows:\n" + JOURNEY_YAML
ONE_GOAL = """\
suite: sign-in
flows:
  - name: sign-in
    goal: Sign in
    inputs: {email: ada@example.com}
    secrets: {password: env:SIGNIN_PW}
    params: {max_steps: 9}
"""
BAD = "suite: s\nflows:\n  - name: a\n    goal: Sign in\n    retries: many\n"


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker holds: the references' values under `GOALFLEET_SECRET_`."""
    monkeypatch.setenv("GOALFLEET_SECRET_SUITE_PW", PASSWORD)
    monkeypatch.setenv("GOALFLEET_SECRET_SIGNIN_PW", PASSWORD)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "flows.yaml"
    path.write_text(text)
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_a_journey_from_a_flows_file_runs_on_one_local_device(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, platform: str
) -> None:
    """The 8-step dark-mode journey: every step passed, each row carrying its step, the
    secret typed (sign-in passed) and in no output."""
    path = write(tmp_path, SUITE)
    code, out, err = run_cli(
        capsys, "--device", f"sim:settings-{platform}", "--flows", str(path),
        "--only", "dark-mode", "--json", "--evidence", str(tmp_path / "ev"),
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert (result["status"], result["reason"]) == ("done", "all 8 steps passed")
    assert [j["passed"] for j in result["journey"]] == [True] * 8
    assert {r["journey_step"] for r in result["steps"]} == set(range(1, 9))
    scrolls = [
        r["action"] for r in result["steps"] if r["action"] and r["action"]["kind"] == "scroll"
    ]
    assert scrolls
    assert {a["direction"] for a in scrolls} == {"down"}
    assert PASSWORD not in out + err
    assert PASSWORD not in "".join(
        p.read_text(errors="replace") for p in (tmp_path / "ev").rglob("*.json")
    )


def test_the_journey_s_failing_step_is_the_exit_and_the_table_names_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, SUITE)
    code, out, _ = run_cli(
        capsys, "--device", "sim:settings-ios", "--flows", str(path),
        "--only", "dark-mode-unchecked", "--evidence", str(tmp_path / "ev"),
    )  # fmt: skip
    assert code == 1
    assert "step 4 (theme is dark) did not pass" in out
    assert "scroll" not in out  # this flow never scrolls: no step of another flow ran


def test_a_goal_flow_takes_its_params_and_a_flag_overrides_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, ONE_GOAL)
    ev = ["--evidence", str(tmp_path / "ev")]
    code, out, _ = run_cli(
        capsys, "--device", "sim:signin-ios", "--flows", str(path), "--json", *ev
    )
    assert code == 0
    assert json.loads(out)["status"] == "done"  # one flow: no --only needed
    code, out, _ = run_cli(
        capsys, "--device", "sim:signin-ios", "--flows", str(path), "--max-steps", "1",
        "--json", *ev,
    )  # fmt: skip
    assert code == 1
    result = json.loads(out)
    assert (result["status"], len(result["steps"])) == ("max-steps", 1)


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        (SUITE, [], "--only: the file has 2 flows (dark-mode, dark-mode-unchecked); name one"),
        (SUITE, ["--only", "nope"], "--only nope: no such flow in suite 'settings-journeys'"),
        (SUITE, ["--only", "dark-mode", "--goal", "Sign in"], "give --goal or --flows, not both"),
        (ONE_GOAL, ["--input", "email=x@y.z"], "--input: a flow's inputs are its file's"),
        (ONE_GOAL, ["--secret", "password=env:X"], "--secret: a flow's secrets are its file's"),
        (ONE_GOAL, ["--plain-field", "password"], "--plain-field: a flow's secrets are its file's"),
        (BAD, [], "flows.yaml:line 5: flows[0].retries"),
    ],
)
def test_a_wrong_combination_is_one_line_exit_2_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    text: str,
    args: list[str],
    message: str,
) -> None:
    path = write(tmp_path, text)
    code, out, err = run_cli(capsys, "--device", "sim:settings-ios", "--flows", str(path), *args)
    assert (code, out) == (2, "")
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_neither_goal_nor_flows_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "--device", "sim:signin-ios")
    assert code == 2
    assert "give --goal (one goal) or --flows FILE (a flow of a flows file)" in err


def test_a_secret_the_environment_lacks_is_named_before_the_device_opens(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOALFLEET_SECRET_SIGNIN_PW")
    path = write(tmp_path, ONE_GOAL)
    code, out, err = run_cli(capsys, "--device", "sim:signin-ios", "--flows", str(path))
    assert (code, out) == (2, "")
    assert "env:SIGNIN_PW" in err
    assert "GOALFLEET_SECRET_SIGNIN_PW" in err
