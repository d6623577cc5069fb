"""Redis killed and started again (AOF on) under a running batch: queued and running runs
survive, workers and the API reconnect and carry on; while Redis is down the API answers 503
and writes nothing half-way."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import redis
from chaoskit import SECRET_VALUE, TOKEN, chaos_settings
from reportkit import report_path

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis
from workers.core.model import RunStatus

SIGN_IN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:CHAOS_PW"}},
    "done_when": "Welcome",
}
DEVICES = ("redis-1", "redis-2")
REPORT = report_path("redis_restart")


def _records(db: redis.Redis, prefix: str) -> set[str]:
    """Every goalfleet key that is not a live heartbeat or a wake-up (those move on their own):
    run records, step tables, batches, idempotency keys, pending."""
    keep = set()
    for key in db.scan_iter(match=f"{prefix}:*", count=1000):
        k = str(key)
        if k.endswith(":lease") or k == f"{prefix}:wake" or k.startswith(f"{prefix}:device"):
            continue
        keep.add(k)
    return keep


def test_redis_restart_loses_nothing(  # noqa: PLR0915 - one scenario end to end: start, kill, check, report
    aof_redis: LocalRedis, tmp_path: Path
) -> None:
    """SIGKILL Redis while runs are queued and running; during the outage the API answers 503
    (health too) and no key appears; after the restart (same port, AOF) every run ends `done`,
    the submit refused during the outage goes through with the same idempotency key, and the
    workers' devices are alive again."""
    # The outage (>= 3 s) is shorter than the lease: the workers wait it out. A longer one
    # stands them down (fencing: a replacement may hold their devices by then).
    settings = chaos_settings(aof_redis.url, lease_s=8.0)
    prefix = settings.key_prefix
    fleet = LocalFleet(
        settings, log_dir=tmp_path, extra_env={"GOALFLEET_SECRET_CHAOS_PW": SECRET_VALUE}
    )
    db = redis.Redis.from_url(settings.redis_url, decode_responses=True)
    try:
        fleet.start_api()
        fleet.start_scheduler()
        for d in DEVICES:
            fleet.start_worker(SimWorker(d, "ios", labels={"pool": "r"}, latency_scale=0.3))
        fleet.wait_devices(list(DEVICES), timeout_s=90)
        http = httpx.Client(
            base_url=fleet.api_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15
        )
        batch = http.post(
            "/v1/batches", json={**SIGN_IN, "selector": {"labels": {"pool": "r"}}, "count": 8}
        ).json()
        ids: list[str] = batch["runs"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # kill it while one run is mid-way
            running = [i for i in ids if db.hget(f"{prefix}:run:{i}", "status") == "running"]
            if running and db.hlen(f"{prefix}:run:{running[0]}:steps") >= 1:
                break
            time.sleep(0.02)
        before_status = {i: db.hget(f"{prefix}:run:{i}", "status") for i in ids}
        before = _records(db, prefix)
        aof_redis.kill()  # SIGKILL: no shutdown save; AOF (fsync always) is all there is
        t_down = time.monotonic()

        # -- Redis down: 503, nothing written --------------------------------------------
        down = {
            "submit": http.post(
                "/v1/runs",
                json={**SIGN_IN, "device": "redis-1"},
                headers={"Idempotency-Key": "during-outage"},
            ),
            "batch": http.post(
                "/v1/batches", json={**SIGN_IN, "selector": {"labels": {"pool": "r"}}}
            ),
            "get": http.get(f"/v1/runs/{ids[0]}"),
            "cancel": http.post(f"/v1/runs/{ids[-1]}/cancel"),
            "devices": http.get("/v1/devices"),
        }
        for name, resp in down.items():
            assert resp.status_code == 503, (name, resp.status_code, resp.text)
            body = resp.json()
            assert body["error"] == "REDIS_UNAVAILABLE", (name, body)
            assert "nothing was written" in body["message"]
        health = http.get("/health")  # with the token: the detail
        assert health.status_code == 503
        assert health.json()["redis"] == "unreachable"
        public = httpx.get(f"{fleet.api_url}/health", timeout=15)
        assert (public.status_code, public.json()) == (503, {"status": "unavailable"})
        time.sleep(max(0.0, 3.0 - (time.monotonic() - t_down)))

        aof_redis.start()
        t_up = time.monotonic()
        after = _records(db, prefix)
        assert after == before, {"lost": before - after, "appeared": after - before}
        assert not db.exists(f"{prefix}:idem:during-outage")
        assert {i: db.hget(f"{prefix}:run:{i}", "status") for i in ids} == before_status

        # -- everything carries on ---------------------------------------------------------
        retry = http.post(
            "/v1/runs",
            json={**SIGN_IN, "device": "redis-1"},
            headers={"Idempotency-Key": "during-outage"},
        )
        assert retry.status_code == 201, retry.text  # created now, not a half-written replay
        ids.append(retry.json()["id"])
        deadline = time.monotonic() + 120
        finished: dict[str, dict[str, object]] = {}
        first_done_s = None
        while time.monotonic() < deadline and len(finished) < len(ids):
            for i in ids:
                if i in finished:
                    continue
                rec = http.get(f"/v1/runs/{i}")
                if rec.status_code == 200 and RunStatus(rec.json()["status"]).terminal:
                    finished[i] = rec.json()
                    if first_done_s is None:
                        first_done_s = time.monotonic() - t_up
            time.sleep(0.2)
        all_done_s = time.monotonic() - t_up
        statuses = {i: r["status"] for i, r in finished.items()}
        assert len(finished) == len(ids), f"not terminal: {set(ids) - set(finished)}"
        assert set(statuses.values()) == {"done"}, {
            i: (r["status"], r["attempt"], r["reason"]) for i, r in finished.items()
        }
        devices = http.get("/v1/devices").json()
        alive = {d["info"]["id"] for d in devices if d["alive"]}
        assert set(DEVICES) <= alive
        report = {
            "runs": len(ids),
            "running_at_kill": sum(s == "running" for s in before_status.values()),
            "queued_at_kill": sum(s == "queued" for s in before_status.values()),
            "down_s": round(t_up - t_down, 1),
            "api_503_while_down": len(down) + 1,
            "redelivered_runs": sum(int(str(r["attempt"])) > 1 for r in finished.values()),
            "first_finish_after_restart_s": round(first_done_s or 0.0, 2),
            "all_finished_after_restart_s": round(all_done_s, 2),
        }
        REPORT.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report))  # noqa: T201 - the numbers for docs/reliability.md
        http.close()
    finally:
        fleet.stop()
        db.close()
