"""A worker that dies whole (SIGKILL of its main process and its pool child) in the middle of a
run (issue 32): the run moves to the identical idle device beside it within three leases and
ends `done` there, attempt 2, with no two devices acting on it at once; the dead worker's
restarted process runs nothing a second time (its message was taken on receipt and died with
it: the broker delivers at most once, and the lapsed sweep was the run's one redelivery)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from chaoskit import SECRET_VALUE, chaos_settings, children, read_sessions
from reportkit import report_path

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.core.model import RunStatus

SIGN_IN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:CHAOS_PW"}},
    "done_when": "Welcome",
    "selector": {"labels": {"pool": "twins"}},
}
TWINS = ("twin-1", "twin-2")
LEASE_S = 3.0
REPORT = report_path("dead-worker")


def _running_with_a_step(db: redis.Redis, prefix: str, run_id: str, deadline_s: float) -> str:
    """The device the run is running on, once its first step row is written."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        rec = db.hgetall(f"{prefix}:run:{run_id}")
        if rec.get("status") == "running" and db.hlen(f"{prefix}:run:{run_id}:steps"):
            return str(rec["device"])
        time.sleep(0.01)
    raise AssertionError(f"run {run_id} wrote no step within {deadline_s} s")


def test_a_dead_workers_run_moves_to_the_other_device(
    own_redis: LocalRedis, tmp_path: Path
) -> None:
    """SIGKILL of the whole worker holding a run (after its first step): the run is pending
    again and `done` on the twin in under three leases, at attempt 2; the twin opened its
    device session only after the kill, and the dead device none after it; the restarted
    dead worker runs nothing of it (the run stays done at attempt 2, the device ran nothing,
    through two orphan sweeps' worth of waiting)."""
    settings = chaos_settings(
        own_redis.url,
        lease_s=LEASE_S,
        heartbeat_interval_s=0.5,
        soft_time_limit_s=8,
        time_limit_s=9,
    )
    prefix = settings.key_prefix
    logs = {d: tmp_path / f"sessions-{d}.log" for d in TWINS}
    specs = {
        d: SimWorker(d, "android", labels={"pool": "twins"}, latency_scale=0.3,
                     session_log=logs[d], loglevel="INFO")
        for d in TWINS
    }  # fmt: skip
    fleet = LocalFleet(
        settings, log_dir=tmp_path, extra_env={"GOALFLEET_SECRET_CHAOS_PW": SECRET_VALUE}
    )
    db = redis.Redis.from_url(settings.redis_url, decode_responses=True)
    try:
        fleet.start_all(list(specs.values()), timeout_s=90)
        c = fleet.client()
        run_id = c.submit_run(SIGN_IN).id
        dead = _running_with_a_step(db, prefix, run_id, deadline_s=60)
        (twin,) = (d for d in TWINS if d != dead)
        worker = fleet.workers.pop(dead)
        pids = {worker.pid, *children(worker.pid)}
        killed_ns, killed_wall = time.monotonic_ns(), time.time()
        worker.signal(signal.SIGKILL)  # the whole process group: main process and pool child
        worker.wait(timeout=10)

        final = c.wait(run_id, timeout_s=60)
        done_after_s = (final.finished_at or 0) - killed_wall
        moved_after_s = (final.started_at or 0) - killed_wall
        assert final.status is RunStatus.DONE, final.reason
        assert final.device == twin
        assert final.attempt == 2
        assert done_after_s < 3 * LEASE_S, done_after_s
        assert [s.index for s in c.steps(run_id)] == [s.index for s in final.result.steps]

        # no overlap: the dead device's sessions all opened before the kill (by the dead
        # worker), the twin's only after it
        dead_opens = [(p, ns) for w, p, ns in read_sessions(logs[dead]) if w == "open"]
        twin_opens = [ns for w, _, ns in read_sessions(logs[twin]) if w == "open"]
        assert dead_opens, "the dead worker opened no session"
        assert all(p in pids and ns < killed_ns for p, ns in dead_opens), (dead_opens, pids)
        assert twin_opens, "the twin opened no session"
        assert min(twin_opens) > killed_ns

        # the restarted worker: nothing of the run comes back to it (at most once delivery)
        restarted_wall = time.time()
        fleet.start_worker(specs[dead])
        fleet.wait_devices([dead], timeout_s=90)
        log = tmp_path / f"worker-{dead}.log"
        time.sleep(2 * settings.orphan_after_s + 2)
        assert b"skipped:" not in log.read_bytes(), log.read_text()[-3000:]  # no message came
        again = c.run(run_id)
        assert (again.status, again.attempt, again.device) == (RunStatus.DONE, 2, twin)
        assert db.hget(f"{prefix}:device:{dead}", "runs_total") in (None, "0")
        assert not [ns for w, _, ns in read_sessions(logs[dead]) if w == "open" and ns > killed_ns]
        report = {
            "lease_s": LEASE_S,
            "heartbeat_s": settings.heartbeat_interval_s,
            "pending_again_and_started_after_kill_s": round(moved_after_s, 2),
            "done_after_kill_s": round(done_after_s, 2),
            "done_after_kill_leases": round(done_after_s / LEASE_S, 2),
            "attempt": final.attempt,
            "restarted_and_nothing_run_again_s": round(time.time() - restarted_wall, 1),
            "overlaps": 0,
        }
        REPORT.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report))  # noqa: T201 - the numbers for docs/reliability.md
        c.close()
    finally:
        fleet.stop()
        db.close()


@pytest.fixture
def own_redis(redis_binary: str) -> Iterator[LocalRedis]:
    with LocalRedis(binary=redis_binary) as server:
        yield server
