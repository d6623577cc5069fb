"""The Redis master SIGKILLed mid-burst, again and again: the sentinels promote a replica; the
API, the scheduler and four sim workers (each its own process) follow it without a restart;
every run the API acknowledged ends `done` (re-run where its first attempt died with the
master), none is lost, none is driven on two devices at once; the killed master comes back as
a replica and is the next cycle's master; a cycle runs with one sentinel killed, too.

`GOALFLEET_FAILOVER_CYCLES` sets the kills (default 5, one more with a sentinel down); the
figures go to `<report dir>/failover.json` (docs/reliability.md quotes them)."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis
from actionkit import device_overlaps, read_actions, run_overlaps
from pydantic import SecretStr
from reportkit import report_path

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import free_port
from testing.sentinels import SentinelLab
from workers.core.model import RunStatus
from workers.fleet.connections import store_client
from workers.processes import spawn
from workers.settings import Settings

TOKEN = "failover-token"
SECRET = "failover-Secret-1414"
DEVICES = [f"fo-{i}" for i in range(1, 5)]
POOL = {"labels": {"pool": "fo"}}
SIGN_IN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:FO_PW"}},
    "done_when": "Welcome",
    "selector": POOL,
}
BURST = 16
KILL_AFTER = 5
"""Acknowledged submits of a cycle before its master is killed (the rest come during and after
the failover)."""
WORKER_BACK_S = 30.0
"""Every worker takes a run again within this long of the kill (measured 6.3-16.3 s over 24
kills: promotion ~4.3 s, then Celery's consumer reconnects 2 s after losing the broker and
4 s after that; longer where a run had to be redelivered; docs/reliability.md)."""
REPORT = report_path("failover")


def cycles() -> int:
    raw = os.environ.get("GOALFLEET_FAILOVER_CYCLES", "")
    return int(raw) if raw.strip() else 5


def failover_settings(lab: SentinelLab) -> Settings:
    # The lease (15 s) outlasts a failover (~2-3 s) and the ~10 s a new master can go without
    # an acknowledging replica when the sentinels must first demote a node that came back
    # (docs/reliability.md): the workers wait it out rather than stand down. The time limits
    # are short so a run whose attempt died is redelivered in seconds.
    return Settings.model_validate(
        {
            "redis_url": "redis://127.0.0.1:6379/0",  # host unused: the sentinels name it
            "redis_sentinels": lab.sentinel_addresses,
            "redis_sentinel_master": lab.name,
            "key_prefix": "gff",
            "api_tokens": [SecretStr(TOKEN)],
            "heartbeat_interval_s": 0.5,
            "lease_s": 15.0,
            "dispatch_interval_s": 0.25,
            "soft_time_limit_s": 15,
            "time_limit_s": 18,
            "visibility_timeout_s": 22,
            "attempt_cap": 5,
            "orphan_after_s": 5.0,
            "retention_s": 3600,
        }
    )


@dataclass
class Burst:
    """One cycle's submits, each retried with its idempotency key until acknowledged."""

    http: httpx.Client
    cycle: int
    acked: dict[str, str] = field(default_factory=dict)
    """Idempotency key -> the run id the API acknowledged (201, or 200 for a replay)."""
    refused: int = 0
    """Answers that acknowledged nothing (503 while the master was gone, connection errors)."""
    ack_ms: list[float] = field(default_factory=list)

    def run(self) -> None:
        for i in range(BURST):
            key = f"fo-{self.cycle}-{i}"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                try:
                    resp = self.http.post(
                        "/v1/runs", json=SIGN_IN, headers={"Idempotency-Key": key}
                    )
                except httpx.TransportError:
                    self.refused += 1
                    time.sleep(0.1)
                    continue
                if resp.status_code in (200, 201):
                    self.acked[key] = resp.json()["id"]
                    self.ack_ms.append((time.perf_counter() - t0) * 1000)
                    break
                assert resp.status_code == 503, resp.text  # unavailable, nothing else
                self.refused += 1
                time.sleep(0.1)
            time.sleep(0.05)


def start_servers(fleet: LocalFleet, log_dir: Path, *, timeout_s: float = 60.0) -> None:
    """`goalfleet api` and `goalfleet scheduler`, each its own process (stopped with the
    fleet), without the workers' secret (both refuse to start holding one)."""
    env = {k: v for k, v in fleet.env.items() if not k.startswith("GOALFLEET_SECRET_")}
    port = free_port()
    commands = {
        "api": ["api", "--host", "127.0.0.1", "--port", str(port)],
        "scheduler": ["scheduler"],
    }
    for name, argv in commands.items():
        fleet.workers[name] = spawn(
            [sys.executable, "-m", "scheduler", *argv, "--loglevel", "INFO"],
            env=env,
            log=log_dir / f"{name}.log",
        )
    fleet.api_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{fleet.api_url}/health", timeout=1).status_code == 200:
                return
        assert fleet.workers["api"].alive(), fleet.workers["api"].tail()
        time.sleep(0.1)
    raise AssertionError(f"the API did not come up: {fleet.workers['api'].tail()}")


def _explain(
    db: redis.Redis, prefix: str, stuck: list[str], tmp_path: Path, lab: SentinelLab
) -> str:
    """What a test that gave up waiting leaves for whoever reads it: the stuck runs' records,
    the last lines of every process of the fleet and what each Redis node says it is."""
    lines = [lab.describe()]
    lines += [f"{rid}: {db.hgetall(f'{prefix}:run:{rid}')}" for rid in stuck[:3]]
    lines.append(f"pending: {db.zcard(f'{prefix}:pending')}")
    lines += [f"{p.name}: {p.read_text()[-1500:]}" for p in sorted(tmp_path.glob("*.log"))]
    return "\n".join(lines)


def test_master_killed_mid_burst_loses_no_acknowledged_run(  # noqa: PLR0915 - one scenario end to end
    lab: SentinelLab, tmp_path: Path
) -> None:
    settings = failover_settings(lab)
    prefix = settings.key_prefix
    fleet = LocalFleet(settings, log_dir=tmp_path, extra_env={"GOALFLEET_SECRET_FO_PW": SECRET})
    db = store_client(settings, timeout_s=2.0, outage_wait_s=30.0)
    figures: list[dict[str, object]] = []
    all_runs: dict[str, str] = {}
    try:
        start_servers(fleet, tmp_path)
        for d in DEVICES:
            log = tmp_path / f"sessions-{d}.log"
            fleet.start_worker(
                SimWorker(d, "ios", labels={"pool": "fo"}, latency_scale=0.2, session_log=log)
            )
        fleet.wait_devices(DEVICES, timeout_s=90)
        http = httpx.Client(
            base_url=fleet.api_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15
        )
        for cycle in range(cycles() + 1):
            sentinel_down = cycle == cycles()  # the last cycle: one sentinel killed first
            if sentinel_down:
                lab.kill(lab.sentinels[0])
            old = lab.master()
            burst = Burst(http, cycle)
            submitter = threading.Thread(target=burst.run, name=f"burst-{cycle}")
            submitter.start()
            deadline = time.monotonic() + 30
            while len(burst.acked) < KILL_AFTER and time.monotonic() < deadline:
                time.sleep(0.01)
            acked_before_kill = len(burst.acked)
            lab.kill(old)  # SIGKILL, mid-burst
            t_kill = time.time()
            new = lab.wait_promoted(old)
            promoted_s = time.time() - t_kill
            submitter.join(timeout=120)
            assert not submitter.is_alive(), "the burst did not finish within 120 s"
            assert len(burst.acked) == BURST, burst.acked

            ids = list(burst.acked.values())
            assert len(set(ids)) == BURST  # one run per idempotency key
            all_runs.update(burst.acked)
            deadline = time.monotonic() + 120
            stuck = ids
            while stuck and time.monotonic() < deadline:
                stuck = [
                    rid
                    for rid in ids
                    if not RunStatus(db.hget(f"{prefix}:run:{rid}", "status") or "pending").terminal
                ]
                time.sleep(0.2)
            assert not stuck, f"cycle {cycle}: " + _explain(db, prefix, stuck, tmp_path, lab)
            records = [db.hgetall(f"{prefix}:run:{rid}") for rid in ids]
            statuses = {r["id"]: r["status"] for r in records}
            assert set(statuses.values()) == {"done"}, statuses  # none lost, none failed

            after = [r for r in records if r.get("started_at") and float(r["started_at"]) > t_kill]
            back = {
                d: min(float(r["started_at"]) for r in after if r["device"] == d) - t_kill
                for d in DEVICES
                if any(r["device"] == d for r in after)
            }
            assert set(back) == set(DEVICES), f"devices that took no run after the kill: {back}"
            assert max(back.values()) <= WORKER_BACK_S, (cycle, figures, back)
            dispatched = [
                float(r["dispatched_at"])
                for r in records
                if r.get("dispatched_at") and float(r["dispatched_at"]) > t_kill
            ]
            figures.append(
                {
                    "cycle": cycle,
                    "sentinel_down": sentinel_down,
                    "acknowledged": len(ids),
                    "acknowledged_before_kill": acked_before_kill,
                    "refused_then_retried": burst.refused,
                    "lost": 0,
                    "re_run": sum(1 for r in records if int(r.get("attempt") or 1) > 1),
                    "promoted_s": round(promoted_s, 2),
                    "first_dispatch_after_kill_s": round(min(dispatched) - t_kill, 2),
                    "every_worker_back_s": round(max(back.values()), 2),
                    "submit_ack_ms_median": round(statistics.median(burst.ack_ms), 1),
                }
            )

            # the demoted master comes back (empty, as configured: a master) and the
            # sentinels make it a replica of the new one, which it then serves as
            lab.restart(old)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and lab.role(old) != "slave":
                time.sleep(0.1)
            assert lab.role(old) == "slave", f"{old.name} did not become a replica"
            lab.wait_replicated(new, 2, timeout_s=60)  # both replicas, as the next kill needs
            lab.wait_sentinels_agree(new, timeout_s=60)

        # one run driven by two workers at once, or a device by two: never
        actions = [
            a
            for d in DEVICES
            for a in read_actions(tmp_path / f"sessions-{d}.log", worker=d, device=d)
        ]
        assert actions, "the sim devices logged no command"
        assert run_overlaps(actions) == []
        assert device_overlaps(actions) == []
        for name in [*DEVICES, "api", "scheduler"]:  # each the process it started as
            assert fleet.workers[name].alive(), fleet.workers[name].tail()
    finally:
        fleet.stop()
        db.close()
    REPORT.write_text(json.dumps({"cycles": figures, "runs": len(all_runs)}, indent=2))
