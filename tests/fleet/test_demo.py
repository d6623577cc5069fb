"""`goalfleet demo` end to end (its own Redis, API, scheduler and sim workers): every run
ends done, its JSON step rows say who decided, and runs after the first of each flow decide
known screens from the decision memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.fleet


def test_demo_json_shows_memory_hits() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    env.pop("REDIS_URL", None)  # its own Redis, like a fresh machine
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", "demo", "--devices", "2", "--runs", "6", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    summary, runs = out["summary"], out["runs"]
    assert summary["statuses"] == {"done": 6}
    rows = [
        s
        for r in runs
        for s in r["result"]["steps"]
        if s["decision"] and not s["decision"]["reason"].startswith("done_when")
    ]
    assert rows
    assert all(s["decision"]["decided_by"] in {"rules", "memory"} for s in rows)
    assert summary["decided_by"]["memory"] > 0
    assert summary["memory"]["hit"] == summary["decided_by"]["memory"]
    assert summary["memory"]["writes"] > 0


def test_demo_escalations_answers_as_a_person_and_the_fleet_learns() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    env.pop("REDIS_URL", None)
    argv = ["demo", "--escalations", "--devices", "2", "--runs", "4", "--latency-scale", "0.1"]
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", *argv, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "goalfleet answer" in proc.stderr  # the person's command, shown
    out = json.loads(proc.stdout)
    assert out["summary"]["statuses"] == {"done": 4}
    chooser = [
        s
        for r in out["runs"]
        for s in r["result"]["steps"]
        if s["screen"] == "Choose how to continue"
    ]
    assert len(chooser) == 4
    assert all(s["decision"]["decided_by"] == "memory" for s in chooser)
    assert all(s["memory"]["source"] == "human" for s in chooser)
