"""The reports of a suite's batch, from its runs and rows (no fleet): JUnit as a CI system
reads it (junitparser's Surefire reading: failure vs error, rerun and flaky elements, skipped),
one testcase per flow x device; an infrastructure failure (errored) told from a decision one
(blocked, escalated, max-steps); the HTML holds the matrix and the step tables, and stays
bounded at 200 steps with pictures (downscaled, then linked only)."""

from __future__ import annotations

import io
import time

from journeykit import EMAIL, JOURNEY, PASSWORD
from junitparser.xunit2 import JUnitXml
from PIL import Image
from rich.console import Console

from scheduler.cli._render import steps_table
from scheduler.suites.html import to_html
from scheduler.suites.junit import to_xml
from scheduler.suites.outcome import THUMB_WIDTH, Report, attach_pictures, cases
from workers.core.journey import run_journey
from workers.core.model import Action, ActionKind, Decision, Inputs, Outcome, RunStatus, StepRow
from workers.core.records import BatchRecord, RunRecord
from workers.core.request import GoalRunRequest
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device

REQUEST = GoalRunRequest(goal="Sign in")


def _run(flow: str, device: str, status: RunStatus, retry: int = 0, reason: str = "") -> RunRecord:
    return RunRecord(id=f"{flow}{device}{retry}".ljust(32, "0"), request=REQUEST, status=status,
                     target=device, device=device, batch="b" * 32, submitted_at=1000.0 + retry,
                     started_at=1000.0, finished_at=1001.5, flow=flow, retry=retry,
                     reason=reason or status.value)  # fmt: skip


def _rows(n: int, *, pictures: bool = False) -> list[StepRow]:
    return [
        StepRow(index=i, screen=f"Screen {i}", refs_generation="1", candidates=3,
                decision=Decision(target="e2", input="email", confidence=0.9, decided_by="rules"),
                action=Action(kind=ActionKind.FILL, ref="e2", pinned="@e2~s1", input="email",
                              shown_value="{email}"),
                outcome=Outcome.ACTED, snapshot_ms=1.0, decide_ms=2.0, action_ms=3.0,
                screenshot="a" * 64 if pictures else None)
        for i in range(1, n + 1)
    ]  # fmt: skip


RUNS = [
    _run("ok", "ios-1", RunStatus.DONE),
    _run("flaky", "ios-1", RunStatus.BLOCKED, 0, "the app shows an outage"),
    _run("flaky", "ios-1", RunStatus.DONE, 1),
    _run("broken", "android-1", RunStatus.MAX_STEPS, 0),
    _run("broken", "android-1", RunStatus.ESCALATED, 1, "not sure"),
    _run("infra", "android-1", RunStatus.BLOCKED, 0),
    _run("infra", "android-1", RunStatus.ERRORED, 1, "device went away"),
    _run("gone", "ios-1", RunStatus.CANCELLED),
]


def _report(runs: list[RunRecord], rows: int = 2) -> Report:
    batch = BatchRecord(id="b" * 32, total=len(runs), created_at=1000.0, suite="nightly")
    return Report(batch, cases(runs, lambda _r: _rows(rows)), time.time())


def test_each_verdict_reads_as_ci_reads_it(tmp_path) -> None:
    report = _report(RUNS)
    assert {c.flow: c.verdict for c in report.cases} == {
        "ok": "passed", "flaky": "flaky", "broken": "failed", "infra": "errored",
        "gone": "cancelled",
    }  # fmt: skip
    path = tmp_path / "junit.xml"
    path.write_bytes(to_xml(report))
    xml = JUnitXml.fromfile(str(path))
    got = {c.classname: c for suite in xml for c in suite}
    assert set(got) == {f"nightly.{f}" for f in ("ok", "flaky", "broken", "infra", "gone")}
    assert got["nightly.ok"].is_passed
    assert not got["nightly.ok"].is_flaky
    flaky = got["nightly.flaky"]
    assert flaky.is_passed
    assert flaky.is_flaky
    assert [f.type for f in flaky.flaky_failures()] == ["blocked"]
    broken = got["nightly.broken"]
    assert broken.is_failure
    assert not broken.is_error
    assert [r.type for r in broken.result] == ["escalated"]
    assert [r.type for r in broken.rerun_failures()] == ["max-steps"]
    infra = got["nightly.infra"]
    assert infra.is_error
    assert not infra.is_failure
    assert [r.type for r in infra.rerun_failures()] == ["blocked"]
    assert got["nightly.gone"].is_skipped
    root = xml._elem  # the totals a CI summary shows
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "5", "1", "1", "1",
    )  # fmt: skip
    assert "Screen 1" in (got["nightly.ok"].system_out or "")


def test_ci_fails_on_failures_and_on_flaky_unless_allowed() -> None:
    report = _report(RUNS[:3])
    assert [c.flow for c in report.failed(allow_flaky=False)] == ["flaky"]
    assert report.failed(allow_flaky=True) == []
    assert {c.flow for c in _report(RUNS).failed(allow_flaky=True)} == {"broken", "infra", "gone"}


def test_the_html_tells_decision_from_infrastructure_failures() -> None:
    html = to_html(_report(RUNS))
    assert "(decision failure)" in html
    assert "(infrastructure failure)" in html
    assert html.count("<section") == 5
    assert "decided by" in html
    assert "<td>rules</td>" in html


def _png() -> bytes:
    sim = make_sim_device("sim:signin-ios")
    sim.snapshot()
    return sim.screenshot().png


def test_a_200_step_report_stays_small() -> None:
    png = _png()
    runs = [_run("long", "ios-1", RunStatus.DONE)]
    batch = BatchRecord(id="b" * 32, total=1, created_at=1000.0, suite="big")
    found = cases(runs, lambda _r: _rows(200, pictures=True))
    pictured = attach_pictures(found, lambda _rid, _i: png)
    html = to_html(Report(batch, pictured, time.time()), attachments="pictures").encode()
    originals = 200 * len(png)
    assert html.count(b"data:image/png;base64,") == 200
    assert len(html) < 3_500_000
    assert len(html) < originals / 3  # never the originals
    thumb = next(iter(pictured[0].attempts[0].pictures.values())).thumb
    assert thumb is not None
    assert Image.open(io.BytesIO(thumb)).width <= THUMB_WIDTH
    # past the budget a step keeps a link to its picture beside the report, no embed
    tight = attach_pictures(found, lambda _rid, _i: png, budget=20_000)
    small = to_html(Report(batch, tight, time.time()), attachments="pictures")
    assert 0 < small.count("data:image/png;base64,") <= 20
    assert small.count(">picture</a>") + small.count("data:image/png;base64,") == 200
    assert len(small.encode()) < 500_000


def test_what_a_screen_says_is_shown_not_run() -> None:
    """A screen's text, a reason or a goal is text in the report, never markup."""
    evil = "<script>alert(1)</script>"
    run = _run("ok", "ios-1", RunStatus.BLOCKED, reason=evil)
    batch = BatchRecord(id="b" * 32, total=1, created_at=1000.0, suite="s")
    rows = [r.model_copy(update={"screen": evil}) for r in _rows(1)]
    html = to_html(Report(batch, cases([run], lambda _r: rows), time.time()))
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    xml = to_xml(Report(batch, cases([run], lambda _r: rows), time.time()))
    assert b"<script>" not in xml


def test_a_journey_reads_by_step_in_the_html_and_the_steps_table() -> None:
    """A journey's rows are grouped by step in the HTML (the step's title, passed or why it
    failed, who decided it) and `goalfleet steps` shows each row's step: from a real journey
    on the sim, whose check fails."""
    raw = [*JOURNEY[:2], "back", {"name": "theme is dark", "check": '"Theme: Dark" is visible'}]
    steps = GoalRunRequest.model_validate({"steps": raw}).steps or []
    inputs = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
    result = run_journey(
        make_sim_device("sim:settings-ios"), "j", steps=steps, decider=RulesDecider(), inputs=inputs
    )
    run = _run("journey", "ios-1", result.status, reason=result.reason).model_copy(
        update={"result": result}
    )
    batch = BatchRecord(id="b" * 32, total=1, created_at=1000.0, suite="nightly")
    html = to_html(Report(batch, cases([run], lambda _r: list(result.steps)), time.time()))
    assert html.count('<tr class="step">') == 4
    assert "step 1: 1. goal Sign in (rules) — passed" in html
    assert "step 4: theme is dark (rules) — failed: &#x27;Theme: Dark&#x27; is not visible" in html
    xml = to_xml(Report(batch, cases([run], lambda _r: list(result.steps)), time.time())).decode()
    assert "  — step 2: 2. press Settings (plain) — passed" in xml
    assert "theme is dark (rules) — failed" in xml
    console = Console(width=200, record=True)
    console.print(steps_table(list(result.steps)))
    text = console.export_text()
    assert "journey step" in text
    assert "2. press Settings · plain" in text


def test_a_runs_video_is_linked_and_attached_never_embedded() -> None:
    """The HTML links the video beside the report, JUnit attaches it; a run without one says
    why in the HTML."""
    from workers.core.model import RunResult  # noqa: PLC0415

    webm = b"\x1a\x45\xdf\xa3" + b"v" * 5000
    filmed = _run("ok", "linux-1", RunStatus.DONE).model_copy(
        update={"result": RunResult(status=RunStatus.DONE, goal="g", video="b" * 64)}
    )
    still = _run("sim", "ios-1", RunStatus.DONE).model_copy(
        update={
            "result": RunResult(
                status=RunStatus.DONE, goal="g", video_note="this device records no video"
            )
        }
    )
    batch = BatchRecord(id="b" * 32, total=2, created_at=1000.0, suite="nightly")
    found = cases([filmed, still], lambda _r: _rows(1))
    report = Report(batch, attach_pictures(found, lambda _rid, i: webm if i == -1 else None), 0.0)
    html = to_html(report, attachments="pictures")
    name = f"{filmed.id[:8]}-video.webm"
    assert f'<a href="pictures/{name}">video of the run</a>' in html
    assert "no video: this device records no video" in html
    assert "vvvv" not in html  # linked, not embedded
    xml = to_xml(report, attachments="pictures").decode()
    assert f"[[ATTACHMENT|pictures/{name}]]" in xml
    assert f'name="attachment" value="pictures/{name}"' in xml
