"""Every device capability arrives on the worker's real path: a real `goalfleet worker`
process (the object graph it builds: host, telemetry, fence, the kept session) on each backend,
a real Redis on a random port, the real API and scheduler. Two sign-in runs: the first decided
by the rules (and remembered), the second from memory. Each step keeps a picture, and each
remembered action skips the settle window (the hint reached the device); a decided one settles.

On `agent-device`: the real daemon driving the GTK sign-in app on the session's desktop (marked
`agent_device`; fails, never skips, when the Linux target is not installed)."""

from __future__ import annotations

import hashlib
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetkit import quick_settings

from scheduler.client.api_client import ApiError, FleetClient
from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from testing.linux_desktop import LinuxDesktop
from workers.core.model import RunStatus, StepRow
from workers.core.records import RunRecord
from workers.processes import spawn

TOKEN = "worker-path-token"
DEVICE = "contract-1"
PASSWORD = "contract-Pw-4417!"
APP = Path(__file__).resolve().parents[1] / "apps" / "gtk_signin.py"
SIGN_IN = {
    "goal": "Sign in",
    "device": DEVICE,
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:GF_PW"}},
    "done_when": "Welcome",
}


def _linux_worker(fleet: LocalFleet, desk: LinuxDesktop, tmp_path: Path) -> None:
    """`goalfleet worker --backend agent-device` for the GTK app, relaunched before each run."""
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    command = shlex.join(
        [
            "/usr/bin/env",
            f"GTK_SIGNIN_STATE_FILE={tmp_path / 'app.json'}",
            f"GTK_SIGNIN_EXPECTED_PASSWORD_SHA256={digest}",
            *("/usr/bin/python3", str(APP)),
        ]
    )
    argv = [
        *(sys.executable, "-m", "scheduler", "worker", "--device", DEVICE),
        *("--backend", "agent-device", "--platform", "linux", "--loglevel", "INFO"),
        *("--app-id", "signin", "--reset", "relaunch", "--app-command", command),
    ]
    env = {**fleet.env, **{k: v for k, v in desk.env.items() if k not in {"PATH", "HOME"}}}
    fleet.workers[DEVICE] = spawn(argv, env=env, log=tmp_path / f"worker-{DEVICE}.log")


@pytest.fixture(
    params=[
        pytest.param("sim", id="sim"),
        pytest.param("agent-device", id="agent-device", marks=pytest.mark.agent_device),
    ]
)
def fleet(
    request: pytest.FixtureRequest, redis_binary: str, tmp_path: Path
) -> Iterator[LocalFleet]:
    """The API, the scheduler and one real `goalfleet worker` on the backend."""
    desk = request.getfixturevalue("desktop") if request.param == "agent-device" else None
    env = {"HOME": str(tmp_path / "home"), "GOALFLEET_SECRET_GF_PW": PASSWORD}
    with LocalRedis(binary=redis_binary) as server:
        settings = quick_settings(server.url, key_prefix="gfwp", token=TOKEN)
        with LocalFleet(settings, log_dir=tmp_path, extra_env=env) as f:
            f.start_api()
            f.start_scheduler()
            if desk is None:
                f.start_worker(SimWorker(DEVICE, "ios"))
            else:
                _linux_worker(f, desk, tmp_path)
            f.wait_devices([DEVICE], timeout_s=120)
            yield f


def finished(c: FleetClient, run_id: str, timeout_s: float = 120.0) -> tuple[RunRecord, list]:
    deadline = time.monotonic() + timeout_s
    while not (run := c.run(run_id)).status.terminal:
        assert time.monotonic() < deadline, (run.status, run.reason)
        time.sleep(0.2)
    assert run.status is RunStatus.DONE, (run.status, run.reason)
    return run, c.steps(run_id)


def pictures(rows: list[StepRow]) -> list[str]:
    """Each step's picture, or why it has none."""
    return [row.screenshot or f"none: {row.screenshot_note}" for row in rows]


def test_each_capability_arrives_through_the_worker(fleet: LocalFleet):
    """A picture per step on both runs; the decided run settles each action; the remembered
    run is all hits, and each of its actions skipped the settle window."""
    with fleet.client() as c:
        _, decided = finished(c, c.submit_run(SIGN_IN).id)
        _, remembered = finished(c, c.submit_run(SIGN_IN).id)
    for rows in (decided, remembered):
        assert rows
        assert all(row.screenshot for row in rows), pictures(rows)
    acted = [row for row in decided if row.result is not None]
    assert len(acted) >= 3, decided  # email, password, sign in
    assert [row.result.settle_skipped for row in acted] == [False] * len(acted)
    hits = [row for row in remembered if row.result is not None]
    assert [row.memory.outcome if row.memory else None for row in hits] == ["hit"] * len(acted)
    assert [row.result.settle_skipped for row in hits] == [True] * len(acted)


JOURNEY = {
    "device": DEVICE,
    "steps": [
        {k: v for k, v in SIGN_IN.items() if k != "device"},
        {"wait": {"for": "Welcome", "timeout_s": 5}},
        {"check": '"Welcome" is visible'},
    ],
}


def test_a_journey_runs_through_the_worker(fleet: LocalFleet):
    """A journey on the worker's real path: its goal step, a device action (wait) and a check
    each arrive, every row with its step and a picture (a plain step's too)."""
    with fleet.client() as c:
        run, rows = finished(c, c.submit_run(JOURNEY).id)
    assert run.result is not None
    assert [j.passed for j in run.result.journey] == [True, True, True]
    assert [j.source for j in run.result.journey][1:] == ["plain", "rules"]
    assert {row.journey_step for row in rows} == {1, 2, 3}
    assert all(row.screenshot for row in rows), pictures(rows)


def played_duration(base: str, run_id: str) -> float:
    """The run's page in Debian's chromium: sign in, play its `<video>`, read its duration."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - the browser test only

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{base}/ui/runs/{run_id}")
            page.fill("#token", TOKEN)
            page.click("#sign-in")
            video = page.locator("#run-video")
            video.wait_for(timeout=30_000)
            page.wait_for_function(
                "() => { const v = document.querySelector('#run-video');"
                " return v && v.readyState >= 1 && Number.isFinite(v.duration) && v.duration > 0 }",
                timeout=30_000,
            )
            video.evaluate("v => v.play()")
            page.wait_for_function(
                "() => document.querySelector('#run-video').currentTime > 0", timeout=30_000
            )
            assert errors == [], errors  # a CSP refusal of the media would be one
            return float(video.evaluate("v => v.duration"))
        finally:
            browser.close()


def test_a_run_keeps_a_video_where_the_device_records(
    fleet: LocalFleet, request: pytest.FixtureRequest
):
    """The Linux target films the app's window: the run's video is WebM, served under the
    pictures' rule and played in the console; a run may turn its own off (`"video"`, a bad
    value refused naming the field). The sim has no screen to film: it says so."""
    with fleet.client() as c:
        run, _ = finished(c, c.submit_run(SIGN_IN).id)
        assert run.result is not None
        if request.node.callspec.params["fleet"] == "sim":
            assert run.result.video is None
            assert run.result.video_note == "this device records no video", run.result
            return
        assert run.result.video is not None, run.result.video_note
        data = c.video(run.id)
        off, _ = finished(c, c.submit_run({**SIGN_IN, "video": "off"}).id)  # the run's own
        assert off.result is not None
        assert (off.result.video, off.result.video_note) == (None, "video is off")
        with pytest.raises(ApiError, match="video"):
            c.submit_run({**SIGN_IN, "video": "sometimes"})
    assert data[:4] == b"\x1a\x45\xdf\xa3"  # Matroska/WebM
    assert PASSWORD.encode() not in data
    assert played_duration(fleet.api_url, run.id) > 0
