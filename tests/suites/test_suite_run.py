"""`goalfleet suite run FILE --wait` on two flows over iOS and Android sim devices, as CI runs
it: one batch for the whole matrix, both reports written, the flaky flow (the `flaky` sim app
fails its first attempt on each device) reported flaky in both, each attempt kept with its
rows, and the exit code failing CI on a flaky flow unless `--allow-flaky`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from browserkit import open_report
from junitparser.xunit2 import JUnitXml
from suitekit import FLOWS, SECRET_VALUE, goalfleet

from scheduler.local.fleet import LocalFleet


@pytest.fixture(scope="module")
def suite_run(fleet: LocalFleet, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("suite-reports")
    flows = out / "flows.yaml"
    flows.write_text(FLOWS)
    junit, html = out / "junit.xml", out / "report.html"
    proc = goalfleet(
        fleet, "suite", "run", str(flows), "--wait", "--junit", str(junit), "--html", str(html)
    )
    return {"proc": proc, "junit": junit, "html": html, "dir": out}


def test_one_batch_for_the_matrix_and_the_flaky_flow_fails_ci(
    suite_run: dict[str, object], fleet: LocalFleet
) -> None:
    proc = suite_run["proc"]
    assert isinstance(proc, subprocess.CompletedProcess)
    assert proc.returncode == 1, proc.stderr  # flaky, not allowed: CI fails
    batches = re.findall(r"batch ([0-9a-f]{32})", proc.stderr)
    assert len(set(batches)) == 1, proc.stderr
    lines = {tuple(line.split()[:4]) for line in proc.stderr.splitlines()}
    assert ("passed", "sign-in", "on", "ios-signin") in lines
    assert ("passed", "sign-in", "on", "android-signin") in lines
    assert ("flaky", "sign-in-flaky", "on", "ios-flaky") in lines
    assert ("flaky", "sign-in-flaky", "on", "android-flaky") in lines
    with fleet.client() as api:
        runs = api.batch_runs(batches[0])
    assert len(runs) == 6  # 4 cases, the two flaky ones twice
    for first in (r for r in runs if r.flow == "sign-in-flaky" and r.retry == 0):
        assert first.status.value == "blocked"
        second = next(r for r in runs if r.retry_of == first.id)
        assert (second.status.value, second.retry, second.target) == ("done", 1, first.target)
        with fleet.client() as api:
            assert api.steps(first.id), "the failed attempt keeps its rows"
            assert api.steps(second.id)


def test_allow_flaky_passes_and_report_alone_agrees(
    suite_run: dict[str, object], fleet: LocalFleet, tmp_path: Path
) -> None:
    proc = suite_run["proc"]
    assert isinstance(proc, subprocess.CompletedProcess)
    batch = re.findall(r"batch ([0-9a-f]{32})", proc.stderr)[0]
    again = goalfleet(fleet, "report", batch[:8], "--allow-flaky", "--json")
    assert again.returncode == 0, again.stderr
    verdicts = {(c["flow"], c["device"]): c["verdict"] for c in json.loads(again.stdout)["cases"]}
    assert verdicts == {
        ("sign-in", "ios-signin"): "passed", ("sign-in", "android-signin"): "passed",
        ("sign-in-flaky", "ios-flaky"): "flaky", ("sign-in-flaky", "android-flaky"): "flaky",
    }  # fmt: skip
    listed = goalfleet(fleet, "runs", "--suite", "signin-smoke", "--flow", "sign-in-flaky",
                       "--batch", batch[:8], "--json")  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    attempts = sorted((r["target"], r["retry"], r["status"]) for r in json.loads(listed.stdout))
    assert attempts == [
        ("android-flaky", 0, "blocked"), ("android-flaky", 1, "done"),
        ("ios-flaky", 0, "blocked"), ("ios-flaky", 1, "done"),
    ]  # fmt: skip
    strict = goalfleet(fleet, "report", batch[:8])
    assert strict.returncode == 1
    assert "2 passed, 2 flaky" in strict.stderr


def test_junit_reads_as_a_ci_system_reads_it(suite_run: dict[str, object]) -> None:
    junit = suite_run["junit"]
    assert isinstance(junit, Path)
    xml = JUnitXml.fromfile(str(junit))
    cases = {c.name: c for suite in xml for c in suite}
    assert set(cases) == {
        "sign-in on ios-signin (ios)",
        "sign-in on android-signin (android)",
        "sign-in-flaky on ios-flaky (ios)",
        "sign-in-flaky on android-flaky (android)",
    }
    for name, case in cases.items():
        assert case.is_passed, name  # flaky is a pass that records its failed attempts
        if "flaky" in name:
            assert case.is_flaky
            (flaky,) = case.flaky_failures()
            assert flaky.type == "blocked"
            assert "Something went wrong" in (flaky.system_out or "")
        else:
            assert not case.is_flaky
        out = case.system_out or ""
        assert "fill" in out
        assert "[[ATTACHMENT|goalfleet-pictures/" in out
        attached = re.findall(r"\[\[ATTACHMENT\|([^\]]+)\]\]", out)
        assert all((junit.parent / a).is_file() for a in attached)
    assert SECRET_VALUE not in junit.read_text()


def test_html_is_one_bounded_file_with_the_matrix(suite_run: dict[str, object]) -> None:
    html = suite_run["html"]
    assert isinstance(html, Path)
    text = html.read_text()
    assert text.count('class="v flaky"') >= 2 + 2  # matrix cells + section headings
    assert "sign-in-flaky" in text
    assert 'src="http' not in text  # nothing fetched
    assert "data:image/png;base64," in text or "data:image/jpeg;base64," in text
    assert SECRET_VALUE not in text
    assert len(text.encode()) < 3_000_000


def test_html_renders_in_headless_chromium_without_console_errors(
    suite_run: dict[str, object],
) -> None:
    """Debian's chromium through Playwright (no browser download), offline: the report
    renders its matrix and step tables and pictures, and logs no console error. Its
    screenshot goes to GOALFLEET_REPORT_SHOT when set (docs/suite-report.png was made so)."""
    html = suite_run["html"]
    assert isinstance(html, Path)
    shot = os.environ.get("GOALFLEET_REPORT_SHOT")
    target = Path(shot) if shot else html.with_suffix(".png")
    page = open_report(html, shot=target)
    assert page.title == "goalfleet report: signin-smoke"
    assert page.tables >= 1
    assert page.sections == 4
    assert len(page.image_widths) >= 20
    assert all(0 < w <= 200 for w in page.image_widths), page.image_widths  # decoded, downscaled
    assert target.stat().st_size > 10_000
    assert page.errors == []


def test_a_matrix_no_device_matches_is_refused_naming_its_cell(
    fleet: LocalFleet, tmp_path: Path
) -> None:
    flows = tmp_path / "flows.yaml"
    flows.write_text(FLOWS.replace("labels: {app: flaky}", "labels: {app: nowhere}"))
    proc = goalfleet(fleet, "suite", "run", str(flows))
    assert proc.returncode == 2
    assert "flows[1].matrix[0]: matches no registered device" in proc.stderr
    ok = goalfleet(fleet, "suite", "run", str(flows), "--only", "sign-in", "--json")
    assert ok.returncode == 0, ok.stderr
    with fleet.client() as api:
        batch = api.wait_batch(json.loads(ok.stdout)["id"], timeout_s=60)
    assert (batch.suite, batch.total, batch.counts) == ("signin-smoke", 2, {"done": 2})


def test_a_wait_that_times_out_reports_the_cases_still_running(
    fleet: LocalFleet, flows_file: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    proc = goalfleet(fleet, "suite", "run", str(flows_file), "--only", "sign-in", "--wait",
                     "--timeout", "0", "--junit", str(junit))  # fmt: skip
    assert "not finished after 0 s" in proc.stderr
    # the runs are fast: some may have ended by the time the report is read; any still
    # running is incomplete, and fails CI
    lines = [ln.split()[0] for ln in proc.stderr.splitlines() if " sign-in on " in ln]
    assert len(lines) == 2, proc.stderr
    assert set(lines) <= {"passed", "incomplete"}
    assert proc.returncode == (1 if "incomplete" in lines else 0), proc.stderr
    assert JUnitXml.fromfile(str(junit)).tests == 2
    with fleet.client() as api:  # the batch goes on; let it end before the next test
        api.wait_batch(re.findall(r"batch ([0-9a-f]{32})", proc.stderr)[0], timeout_s=60)


def test_the_blocked_attempts_failure_report_is_in_the_suite_report(
    suite_run: dict[str, object],
) -> None:
    """Each flaky flow's first attempt ended `blocked`: the report shows why under its steps,
    with the final screen's picture fetched through the API (`/final/screenshot`), kept beside
    the step pictures and embedded; a passed attempt has no such section."""
    html = suite_run["html"]
    out = suite_run["dir"]
    assert isinstance(html, Path)
    assert isinstance(out, Path)
    text = html.read_text()
    assert text.count("Why it did not end done") == 2  # the two blocked first attempts
    finals = sorted((out / "goalfleet-pictures").glob("*-final.png"))
    assert len(finals) == 2
    assert all(f.read_bytes().startswith(b"\x89PNG") for f in finals)
    assert text.count('alt="the final screen"') == 2
    assert "next: <code>goalfleet suite run FLOWS.yaml --only sign-in-flaky</code>" in text
