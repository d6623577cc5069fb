"""`goalfleet demo` end to end (its own Redis, API, scheduler and sim workers): every run
ends done, its JSON step rows say who decided, and runs after the first of each flow decide
known screens from the decision memory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import redis
from clikit import goalfleet_json

from scheduler.local.redis import LocalRedis

pytestmark = pytest.mark.fleet


def fresh_machine() -> dict[str, str]:
    """This environment without goalfleet's settings and REDIS_URL: the demo starts its own
    Redis, as on a fresh machine."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_") and k != "REDIS_URL"
    }


def test_demo_json_shows_memory_hits(tmp_path: Path) -> None:
    """... and says where its runs' history went: the embedded database, which
    `goalfleet history` then reads."""
    env = {**fresh_machine(), "GOALFLEET_HISTORY_PATH": str(tmp_path / "history.db")}
    out, proc = goalfleet_json("demo", "--devices", "2", "--runs", "6", env=env)
    assert f"history: 6 of 6 runs stored in sqlite:///{tmp_path / 'history.db'}" in proc.stderr
    report, _ = goalfleet_json("history", "--since", "1h", env=env)
    assert sum(r["runs"] for r in report["pass_rates"]) == 6
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
    shots = Path(summary["screenshots"])  # kept after the demo, for a person to open
    try:
        for run in runs:
            for step in run["result"]["steps"]:
                picture = shots / run["id"][:8] / f"step-{step['index']:03}.png"
                assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", picture
    finally:
        shutil.rmtree(shots)


def test_demo_escalations_answers_as_a_person_and_the_fleet_learns() -> None:
    argv = ["demo", "--escalations", "--devices", "2", "--runs", "4", "--latency-scale", "0.1"]
    out, proc = goalfleet_json(*argv, env=fresh_machine())
    assert "goalfleet answer" in proc.stderr  # the person's command, shown
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


def test_demo_on_a_shared_redis_keeps_its_device_ids_and_leaves_nothing(
    redis_server: LocalRedis,
) -> None:
    """On someone else's Redis (GOALFLEET_REDIS_URL) the demo's fleet is set apart by its key
    prefix alone: its devices keep their plain ids, its runs end done, and on the way out it
    deletes every key it wrote (Celery's too) and nothing else."""
    url = redis_server.url.rsplit("/", 1)[0] + "/3"  # a DB of its own in the session's Redis
    db = redis.Redis.from_url(url, decode_responses=True)
    try:
        db.flushdb()
        db.set("someone:else", "theirs")
        env = {**fresh_machine(), "GOALFLEET_REDIS_URL": url}
        out, _ = goalfleet_json("demo", "--devices", "2", "--runs", "3", env=env)
        assert out["summary"]["statuses"] == {"done": 3}
        assert {r["device"] for r in out["runs"]} <= {"sim-ios-1", "sim-android-1"}
        assert sorted(db.scan_iter(count=1000)) == ["someone:else"]
    finally:
        db.flushdb()
        db.close()
