"""Journeys through `goalfleet suite run --wait` (issue 43's done-when), as CI runs them: the
8-step journey (sign in → Settings → scroll until Appearance → press it → Dark mode → back →
back → check the changed text) passes on a 4-device matrix of iOS and Android sims; a flow
whose check is false fails naming the step; run again, every goal step is decided from the
fleet's memory (0 model or rules decisions: counted from the rows the API returns)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from journeykit import JOURNEY, JOURNEY_YAML
from junitparser.xunit2 import JUnitXml
from suitekit import goalfleet

from scheduler.client.api_client import ApiError
from scheduler.local.fleet import LocalFleet

FLOWS = (
    "suite: settings-journeys\ndefaults:\n  params: {ask_person: false}\nflows:\n" + JOURNEY_YAML
)
DEVICES = ("ios-settings-1", "ios-settings-2", "android-settings-1", "android-settings-2")


@pytest.fixture(scope="module")
def rounds(fleet: LocalFleet, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("journey-reports")
    flows = out / "flows.yaml"
    flows.write_text(FLOWS)
    first = goalfleet(fleet, "suite", "run", str(flows), "--wait", "--junit", str(out / "1.xml"))
    again = goalfleet(fleet, "suite", "run", str(flows), "--only", "dark-mode", "--wait")
    return {"first": first, "again": again, "junit": out / "1.xml"}


def _lines(proc: subprocess.CompletedProcess[str]) -> set[tuple[str, ...]]:
    return {tuple(line.split()[:4]) for line in proc.stderr.splitlines()}


def test_the_journey_passes_on_ios_and_android_and_a_false_check_fails_naming_it(
    rounds: dict[str, object],
) -> None:
    """Round one: dark-mode passes on all four devices; dark-mode-unchecked fails (exit 1),
    its JUnit failure naming step 4 and why."""
    first = rounds["first"]
    assert isinstance(first, subprocess.CompletedProcess)
    assert first.returncode == 1, first.stderr
    lines = _lines(first)
    for device in DEVICES:
        assert ("passed", "dark-mode", "on", device) in lines, first.stderr
    junit = rounds["junit"]
    assert isinstance(junit, Path)
    failed = [
        case
        for suite in JUnitXml.fromfile(str(junit))
        for case in suite
        if not case.is_passed and not case.is_skipped
    ]
    assert failed, junit.read_text()
    said = " ".join(str(r.message) for case in failed for r in case.result)
    assert "step 4 (theme is dark) did not pass: 'Theme: Dark' is not visible" in said


def test_the_second_round_is_decided_from_memory(
    rounds: dict[str, object], fleet: LocalFleet
) -> None:
    """Round two on the same 4 devices: every run done; its goal step's rows all from memory
    (or done_when's rules), none asked of a decider; every step labelled."""
    again = rounds["again"]
    assert isinstance(again, subprocess.CompletedProcess)
    assert again.returncode == 0, again.stderr
    batch = re.findall(r"batch ([0-9a-f]{32})", again.stderr)[0]
    with fleet.client() as api:
        runs = api.batch_runs(batch)
        assert sorted(r.target for r in runs) == sorted(DEVICES)
        for run in runs:
            assert run.result is not None
            assert [j.source for j in run.result.journey] == [
                "memory", "plain", "plain", "plain", "plain", "plain", "plain", "rules"
            ]  # fmt: skip
            rows = api.steps(run.id)
            asked = [r for r in rows if r.seen is not None and r.source != "memory"]
            assert asked == [], [(r.index, r.source) for r in asked]
            assert {r.journey_step for r in rows} == set(range(1, 9))


def test_the_api_takes_a_journey_and_refuses_a_bad_one(fleet: LocalFleet) -> None:
    """`POST /v1/runs` with steps: the run is a journey on that device, its result says each
    step; a step of two kinds is a 422 naming it, nothing stored."""
    body = {
        "device": "android-settings-2",
        "steps": [*JOURNEY[:3], {"press": "Appearance"}, {"check": '"Dark mode" is visible'}],
        "ask_person": False,
    }
    with fleet.client() as api:
        run = api.wait(api.submit_run(body).id, timeout_s=120)
        assert run.status.value == "done", run.reason
        assert run.request.goal == "journey of 5 steps"
        assert run.result is not None
        assert [j.passed for j in run.result.journey] == [True] * 5
        before = len(api.runs()[0])
        with pytest.raises(ApiError) as refused:
            api.submit_run({"steps": [{"press": "A", "back": True}]})
        assert refused.value.status == 422
        assert "a step is exactly one of" in str(refused.value)
        assert len(api.runs()[0]) == before
