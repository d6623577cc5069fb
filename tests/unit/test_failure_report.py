"""The failure report of a run that did not end `done` (`workers.core.failure`): a fresh look at
the screen it ended on (snapshot and picture, taken after the end), the candidates as each
decider of the last step ranked them, what the checks refused and why, and the chain's path."""

from __future__ import annotations

import io
import time
from pathlib import Path

from browserkit import open_report
from PIL import Image

from scheduler.suites.one_run import keep_evidence
from workers.core.chain import Tier
from workers.core.errors import FatalDeviceError
from workers.core.loop import run_goal
from workers.core.model import Decision, Inputs, RunResult, RunStatus, Snapshot
from workers.core.params import RunParams
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest
from workers.core.shots import Camera, MemoryArtifacts
from workers.decide.rules import RulesDecider
from workers.decide.scripted import ScriptedDecider
from workers.devices.pictures import PillowPictures
from workers.devices.sim.device import make_sim_device

EMAIL_ONLY = Inputs.of({"email": "ada@example.com"})
BOTH = Inputs.of({"email": "ada@example.com"}, secret={"password": "hunter2-x"})


def claims_done() -> ScriptedDecider:
    """A first decider that claims the goal reached on every screen."""
    return ScriptedDecider(lambda _s: Decision(done=True, confidence=0.9, reason="looks done"))


def blocked_run() -> tuple[RunResult, MemoryArtifacts]:
    """Sign in on `twins` until "Welcome" shows, with a chain of three: the first decider's
    done claims are refused by the evidence check; the rules decider signs in, then ranks the
    account chooser's two "Continue as …" buttons equally (too unsure to press one); the last
    gives up there: `blocked`."""
    store = MemoryArtifacts()
    gives_up = ScriptedDecider(lambda _s: Decision(blocked=True, reason="two accounts"))
    result = run_goal(
        make_sim_device("sim:twins-ios"),
        "Sign in",
        decider=claims_done(),
        decider_name="claims-done",
        escalate_to=(Tier("rules", RulesDecider()), Tier("gives-up", gives_up)),
        inputs=BOTH,
        params=RunParams(done_when="Welcome"),
        camera=Camera(store, PillowPictures()),
    )
    return result, store


def test_a_blocked_runs_report_shows_its_final_picture_ranked_candidates_and_refusals() -> None:
    result, store = blocked_run()
    assert result.status is RunStatus.BLOCKED, result.reason
    report = result.failure
    assert report is not None
    final = report.final
    # a fresh look after the end: the chooser, its picture stored and readable
    assert final.screen == "Choose how to continue"
    assert final.error == ""
    assert {c.name for c in final.candidates} == {"Continue as ada", "Continue as guest"}
    assert final.screenshot is not None
    with Image.open(io.BytesIO(store.get(final.screenshot) or b"")) as img:
        assert img.width > 100
    # the last step: each decider of the chain, in turn, with its ranking
    claim, rules, last = report.rankings
    assert (claim.decider, claim.answer) == ("claims-done", "done")
    assert claim.escalated == "done refused: done_when 'Welcome' is not visible"
    assert rules.decider == "rules"
    assert [(name, c) for _, name, c in rules.candidates] == [
        ("Continue as ada", 0.8),
        ("Continue as guest", 0.8),
    ]
    assert rules.escalated == "confidence 0.40 is below min_confidence 0.50"
    assert (last.decider, last.answer, last.escalated) == ("gives-up", "blocked", "")
    # every refusal: the evidence check on each step, and the unsure choice
    done_refused = [r for r in report.refusals if r.claim == "done"]
    assert len(done_refused) == len(result.steps)
    assert {r.why for r in done_refused} == {claim.escalated}
    unsure = report.refusals[-1]
    assert (unsure.decider, unsure.why) == ("rules", rules.escalated)
    assert "Continue as ada" in unsure.claim
    assert report.escalation == (
        f"claims-done: done — went up: {claim.escalated}",
        f"rules: {rules.answer} — went up: {rules.escalated}",
        "gives-up: blocked",
    )
    assert "hunter2-x" not in result.model_dump_json()


def test_a_done_run_has_no_failure_report_and_takes_no_extra_look() -> None:
    """A `done` run ends on its last step: no report, no snapshot after it."""
    device = make_sim_device("sim:signin-ios")
    result = run_goal(
        device,
        "Sign in",
        decider=RulesDecider(),
        inputs=Inputs.of({"email": "ada@example.com"}, secret={"password": "hunter2-x"}),
    )
    assert result.status is RunStatus.DONE
    assert result.failure is None


def test_a_device_that_fails_the_last_look_is_a_line_not_another_end() -> None:
    """The report of a run whose device fails the look after the end says why there is no
    final screen; the run keeps the status it ended with."""
    device = make_sim_device("sim:signin-ios")
    first = device.snapshot
    looks = []

    def once() -> Snapshot:
        looks.append(1)
        if len(looks) > 1:
            raise FatalDeviceError("the device went away")
        return first()

    device.snapshot = once  # type: ignore[method-assign]
    result = run_goal(
        device,
        "Sign in",
        decider=ScriptedDecider(lambda _s: Decision(blocked=True, reason="stuck")),
        inputs=EMAIL_ONLY,
    )
    assert result.status is RunStatus.BLOCKED
    assert result.failure is not None
    assert result.failure.final.error == "the device went away"
    assert result.failure.final.screenshot is None
    assert len(looks) == 2


def test_the_html_report_shows_the_final_picture_the_rankings_and_the_refusals(
    tmp_path: Path,
) -> None:
    """The blocked run's report, as `goalfleet run --html` writes it, opened in chromium: the
    final screen's picture decoded (and kept beside the others), each decider's ranking with
    its confidences, the evidence check's refusal, and the command that runs it again."""
    result, store = blocked_run()
    assert result.failure is not None
    failure = result.failure.model_copy(update={"command": "goalfleet run --device sim:twins-ios"})
    result = result.model_copy(update={"failure": failure})
    record = RunRecord(
        id="f" * 32,
        request=GoalRunRequest(goal="Sign in"),
        status=result.status,
        device="sim:twins-ios",
        submitted_at=time.time(),
        reason=result.reason,
        result=result,
    )
    html = tmp_path / "r.html"
    keep_evidence(record, store, tmp_path / "ev", html=html)
    assert (tmp_path / "ev" / "ffffffff-final.png").read_bytes() == store.get(
        failure.final.screenshot or ""
    )
    page = open_report(html)
    assert page.errors == []
    assert "Why it did not end done" in page.texts
    assert "ended on Choose how to continue" in page.texts
    assert "'Continue as ada' 0.80, e" in page.texts  # the rules decider's two, ranked
    assert "done refused: done_when 'Welcome' is not visible" in page.texts
    assert "confidence 0.40 is below min_confidence 0.50" in page.texts
    assert "next: goalfleet run --device sim:twins-ios" in page.texts
    assert len(page.image_widths) == len(result.steps) + 1  # each step's, and the final one
    assert all(w > 0 for w in page.image_widths)
    assert any(u.endswith("/ev/ffffffff-final.png") for u in page.linked)


def test_a_run_that_ended_on_a_device_failure_takes_no_fresh_look() -> None:
    """The device failed the run: the report says so and asks it nothing more (a device that
    hung would hang again)."""
    device = make_sim_device("sim:signin-ios")
    looks = []

    def broken() -> Snapshot:
        looks.append(1)
        raise FatalDeviceError("the device is gone")

    device.snapshot = broken  # type: ignore[method-assign]
    result = run_goal(device, "Sign in", decider=claims_done(), inputs=EMAIL_ONLY)
    assert result.status is RunStatus.ERRORED
    assert result.failure is not None
    assert result.failure.final.error.startswith("no fresh look: the run ended on a device failure")
    assert len(looks) == 1
