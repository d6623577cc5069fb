"""The pause scenario (issue 10): a worker frozen with a run in flight for longer than its
lease (SIGSTOP of its process group: a paused VM, a stopped container, a long GC), a
replacement started for its device, then the first resumed (SIGCONT). The first must stand
down: stop consuming, hand its run back before touching the device again, and exit with
status 3; the replacement runs everything from then on, nothing is lost or run twice."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from chaoskit import SECRET_VALUE, chaos_settings, children, overlaps, read_sessions
from reportkit import report_path

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.core.model import RunStatus
from workers.fleet.keys import Keys
from workers.processes import Child, spawn

SIGN_IN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:CHAOS_PW"}},
    "done_when": "Welcome",
}
DEVICE = "pause-1"
RUNS = 6
LEASE_S = 4.0
STAND_DOWN_BOUND_S = 30.0
"""How long the resumed worker may take to exit (it should take about a heartbeat)."""
EXIT_STAND_DOWN = 3
REPORT = report_path("pause")


@pytest.fixture
def own_redis(redis_binary: str) -> Iterator[LocalRedis]:
    with LocalRedis(binary=redis_binary) as server:
        yield server


class KeyEvents:
    """Keyspace notifications for some keys, in the order Redis executed the commands: (key,
    event) pairs. One subscriber connection gets every channel's messages in that order, so
    a write to a marker key splits them into before and after."""

    def __init__(self, url: str, *keys: str) -> None:
        self.db = redis.Redis.from_url(url, decode_responses=True)
        self.db.config_set("notify-keyspace-events", "Kgh$")
        self.pubsub = self.db.pubsub()
        self.pubsub.subscribe(*[f"__keyspace@0__:{key}" for key in keys])
        self.events: list[tuple[str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            msg = self.pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
            if msg is not None:
                key = str(msg["channel"]).removeprefix("__keyspace@0__:")
                self.events.append((key, str(msg["data"])))

    def after(self, marker: str, key: str) -> list[str]:
        """`key`'s events after the first event of `marker`."""
        seen = [k for k, _ in self.events].index(marker)
        return [e for k, e in self.events[seen + 1 :] if k == key]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.pubsub.close()
        self.db.close()


def _in_flight(db: redis.Redis, prefix: str, ids: list[str], deadline_s: float) -> str:
    """The run the worker is executing, once it has written a step row."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for rid in ids:
            if db.hget(f"{prefix}:run:{rid}", "status") == "running" and db.hlen(
                f"{prefix}:run:{rid}:steps"
            ):
                return rid
        time.sleep(0.02)
    raise AssertionError(f"no run was in flight within {deadline_s} s")


def _wait_holder_change(db: redis.Redis, lease: str, old: str, deadline_s: float) -> str:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        holder = db.get(lease)
        if holder and holder != old:
            return str(holder)
        time.sleep(0.05)
    raise AssertionError(f"the replacement did not take the lease within {deadline_s} s")


def test_a_resumed_worker_that_lost_its_lease_stands_down(  # noqa: PLR0915 - one scenario end to end
    own_redis: LocalRedis, tmp_path: Path
) -> None:
    """SIGSTOP the worker of `pause-1` mid-run for longer than its 4 s lease, start a
    replacement (it registers once the lease lapsed), SIGCONT the first: it exits with status
    3 within the bound; it opens no device session after it resumed and writes no step row
    after it was frozen (from then on the run's steps see the replacement's claim empty them,
    then exactly the rows the replacement's run kept); the run it had in flight goes back to
    pending once the lease is no longer its worker's (the scheduler's sweep) and is done by
    the replacement (attempt 2); every run ends `done` exactly once; no two sessions on the
    device overlap."""
    settings = chaos_settings(
        own_redis.url,
        lease_s=LEASE_S,
        heartbeat_interval_s=1.0,
        soft_time_limit_s=60,
        time_limit_s=90,
        orphan_after_s=120.0,
    )
    prefix = settings.key_prefix
    sessions = tmp_path / "sessions.log"
    spec = SimWorker(DEVICE, "ios", latency_scale=0.5, session_log=sessions)
    fleet = LocalFleet(
        settings, log_dir=tmp_path, extra_env={"GOALFLEET_SECRET_CHAOS_PW": SECRET_VALUE}
    )
    db = redis.Redis.from_url(settings.redis_url, decode_responses=True)
    lease = Keys(prefix).lease(DEVICE)
    first: Child | None = None
    replacement: Child | None = None
    events: KeyEvents | None = None
    try:
        fleet.start_api()
        fleet.start_scheduler()
        first = fleet.start_worker(spec)
        fleet.wait_devices([DEVICE], timeout_s=90)
        first_holder = str(db.get(lease))
        c = fleet.client()
        ids = [c.submit_run({**SIGN_IN, "device": DEVICE}).id for _ in range(RUNS)]

        inflight = _in_flight(db, prefix, ids, deadline_s=60)
        steps, marker = f"{prefix}:run:{inflight}:steps", f"{prefix}:test:frozen"
        events = KeyEvents(settings.redis_url, steps, marker)
        time.sleep(0.3)  # the subscription is live before the worker is frozen
        first_pids = {first.pid, *children(first.pid)}
        first.pause()
        paused_at = time.monotonic()
        time.sleep(0.2)  # a command the worker sent just before is executed before the marker
        db.set(marker, "1")
        replacement = spawn(spec.argv(), env=fleet.env, log=tmp_path / "replacement.log")
        second_holder = _wait_holder_change(db, lease, first_holder, deadline_s=60)
        paused_s = time.monotonic() - paused_at  # at least until the frozen lease lapsed
        rec = db.hgetall(f"{prefix}:run:{inflight}")
        assert rec["status"] in {"running", "queued"}  # not ended: pending again, or taken

        resumed_ns = time.monotonic_ns()
        resumed_at = time.monotonic()
        first.resume()
        try:
            status = first.wait(timeout=STAND_DOWN_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {STAND_DOWN_BOUND_S} s after SIGCONT: {first.tail()}")
        stand_down_s = time.monotonic() - resumed_at
        assert status == EXIT_STAND_DOWN, first.tail()
        assert "lease_lost_standing_down" in first.log.read_text()

        final = {rid: c.wait(rid, timeout_s=120) for rid in ids}
        assert {r: f.status for r, f in final.items()} == dict.fromkeys(ids, RunStatus.DONE)
        assert final[inflight].attempt == 2  # handed back once: its attempt counted once
        assert all(f.attempt == 1 for r, f in final.items() if r != inflight)
        assert db.hget(f"{prefix}:device:{DEVICE}", "runs_total") == str(RUNS)  # each once
        assert db.hget(f"{prefix}:device:{DEVICE}", "infra_failures") in (None, "0")
        assert db.get(lease) == second_holder
        assert {d.info.id: d.alive for d in c.devices()} == {DEVICE: True}

        # no step row of the first worker once frozen: the run's steps saw the replacement's
        # claim empty them first, then one write per row the replacement's run kept
        after = events.after(marker, steps)
        assert after, "the replacement's claim and rows were not seen"
        assert after[0] == "del", after
        assert after.count("hset") == len(final[inflight].result.steps), after
        # the first worker opened no device session after it resumed, and none overlapped
        reopened = [
            (w, p, ns)
            for w, p, ns in read_sessions(sessions)
            if w == "open" and p in first_pids and ns > resumed_ns
        ]
        assert reopened == []
        assert overlaps(sessions, [], now_ns=time.monotonic_ns()) == []
        REPORT.write_text(
            json.dumps(
                {
                    "runs": RUNS,
                    "lease_s": LEASE_S,
                    "heartbeat_s": settings.heartbeat_interval_s,
                    "paused_s": round(paused_s, 2),
                    "stand_down_after_sigcont_s": round(stand_down_s, 2),
                    "exit_status": status,
                    "in_flight_run_attempts": final[inflight].attempt,
                    "lost": 0,
                    "overlaps": 0,
                },
                indent=2,
            )
        )
    finally:
        if events is not None:
            events.close()
        if replacement is not None:
            replacement.stop(grace_s=10)
        if first is not None:
            first.resume()  # stopped with the fleet; a frozen group would ignore SIGTERM
        fleet.stop()
        db.close()
