"""`goalfleet schedule add FILE --every 1h | --cron ...`, `schedule list`, `schedule remove`
over the fleet's /v1/schedules, as a user types them: an `--every` schedule of a flows file
fires its suite at once (one batch, the runs named by the schedule), a `--cron` one waits for
its minute; a bad period or expression is refused with exit 2, nothing stored."""

from __future__ import annotations

import json
import time
from pathlib import Path

from suitekit import FLOWS, goalfleet

from scheduler.local.fleet import LocalFleet


def test_schedules_from_a_flows_file(fleet: LocalFleet, tmp_path: Path) -> None:
    flows = tmp_path / "flows.yaml"
    flows.write_text(FLOWS)
    added = goalfleet(fleet, "schedule", "add", str(flows), "--every", "1h", "--only", "sign-in",
                      "--json")  # fmt: skip
    assert added.returncode == 0, added.stderr
    hourly = json.loads(added.stdout)
    assert (hourly["name"], hourly["every_s"], hourly["batch"]["suite"]) == (
        "signin-smoke", 3600.0, "signin-smoke",
    )  # fmt: skip
    assert [f["name"] for f in hourly["batch"]["flows"]] == ["sign-in"]
    # an hour half a day away, so the schedule is never due during the test (CI once ran it at
    # 01:59:57 UTC against a fixed "0 2 * * *")
    hour = (time.gmtime().tm_hour + 12) % 24
    nightly = goalfleet(fleet, "schedule", "add", str(flows), "--cron", f"0 {hour} * * *",
                        "--name", "nightly", "--json")  # fmt: skip
    assert nightly.returncode == 0, nightly.stderr
    cron = json.loads(nightly.stdout)
    assert cron["next_at"] > time.time() + 11 * 3600  # waits for that hour

    with fleet.client() as api:
        deadline = time.monotonic() + 30
        while True:  # the scheduler fires the --every one at once
            listed = {s["id"]: s for s in api.schedules()}
            if listed[hourly["id"]].get("last_batch"):
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
        batch = api.wait_batch(listed[hourly["id"]]["last_batch"], timeout_s=60)
        assert batch.suite == "signin-smoke"
        assert batch.counts == {"done": 2}
        runs, _ = api.runs(schedule=hourly["id"])
        assert {(r.flow, r.target) for r in runs} == {
            ("sign-in", "ios-signin"), ("sign-in", "android-signin"),
        }  # fmt: skip
        assert listed[cron["id"]].get("last_batch") is None

    shown = goalfleet(fleet, "schedule", "list")
    assert shown.returncode == 0
    assert "every 3600 s" in shown.stdout
    assert f"cron 0 {hour} * * *" in shown.stdout
    for sid in (hourly["id"], cron["id"]):
        assert goalfleet(fleet, "schedule", "remove", sid).returncode == 0
    assert json.loads(goalfleet(fleet, "schedule", "list", "--json").stdout) == []


def test_a_bad_period_or_expression_is_refused(fleet: LocalFleet, tmp_path: Path) -> None:
    flows = tmp_path / "flows.yaml"
    flows.write_text(FLOWS)
    bad = goalfleet(fleet, "schedule", "add", str(flows), "--every", "soon")
    assert bad.returncode == 2
    assert "--every 'soon': give a period" in bad.stderr
    bad = goalfleet(fleet, "schedule", "add", str(flows), "--cron", "0 25 * * *")
    assert bad.returncode == 2
    assert "the hour field takes 0-23" in bad.stderr
    assert "not '25'" in bad.stderr
    assert json.loads(goalfleet(fleet, "schedule", "list", "--json").stdout) == []
