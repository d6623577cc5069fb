"""`goalfleet run` keeps its evidence: the step pictures and the result in a folder it prints
(`--evidence DIR`, default a private folder per run under the user's state directory), and
`--html FILE` writes the suites' HTML report of the one run, which a browser opens."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from browserkit import open_report

from scheduler.cli.main import main

PASSWORD = "pw-never-shown-42"
SIGN_IN = [
    "--device", "sim:signin-ios", "--goal", "Sign in", "--decider", "rules",
    "--input", "email=ada@example.com", "--secret", "password=env:SIGNIN_PASSWORD",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNIN_PASSWORD", PASSWORD)


def _printed(err: str, label: str) -> Path:
    line = next(x for x in err.splitlines() if x.startswith(f"{label}: "))
    return Path(line.removeprefix(f"{label}: ").split(" (")[0])


def test_run_leaves_pictures_and_a_report_a_browser_opens(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A sim sign-in with `--html`: a picture per step beside the result in the printed folder
    (made private), and the report opens offline in chromium with each step's picture decoded
    and linked to its original."""
    evidence, html = tmp_path / "ev" / "run1", tmp_path / "out" / "r.html"
    code = main(["run", *SIGN_IN, "--evidence", str(evidence), "--html", str(html)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert _printed(err, "evidence") == evidence
    assert stat.S_IMODE(evidence.stat().st_mode) == 0o700
    assert stat.S_IMODE(evidence.parent.stat().st_mode) == 0o700
    result = json.loads((evidence / "result.json").read_text())
    assert result["status"] == "done"
    pictures = sorted(evidence.glob("*.png"))
    assert len(pictures) == len(result["steps"]) >= 4
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in pictures)
    assert PASSWORD not in html.read_text() + out + err
    page = open_report(html)
    assert page.errors == []
    assert page.title == "goalfleet report: Sign in"
    assert "sim:signin-ios" in page.texts
    assert len(page.image_widths) == len(pictures)
    assert all(0 < w <= 200 for w in page.image_widths), page.image_widths
    linked = {Path(u.removeprefix("file://")) for u in page.linked if u.startswith("file://")}
    assert {p.resolve() for p in pictures} <= linked


def test_default_evidence_folder_is_private_under_the_state_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `--evidence`: `$XDG_STATE_HOME/goalfleet/runs/<run id>`, each folder it made
    0700, printed on stderr."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code = main(["run", *SIGN_IN])
    _, err = capsys.readouterr()
    assert code == 0, err
    folder = _printed(err, "evidence")
    assert folder.parent == tmp_path / "state" / "goalfleet" / "runs"
    for made in (folder, folder.parent, folder.parent.parent):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
    assert len(list(folder.glob("*.png"))) >= 4
    assert os.access(folder / "result.json", os.R_OK)
