"""A full Redis (`maxmemory` reached under `noeviction`) or a read-only one (a replica after a
failover) mid-burst is an outage, not a crash: no worker exits, no device is lost, and every
accepted run finishes once Redis takes writes again; a Redis restarted empty is repaired.

Each test starts its own `redis-server` (no persistence) on a random loopback port."""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import httpx
import pytest
import redis
from chaoskit import SECRET_VALUE, TOKEN, chaos_settings
from reportkit import report_path

from scheduler.local.fleet import LocalFleet, SimWorker
from scheduler.local.redis import LocalRedis, free_port
from workers.core.model import RunStatus
from workers.settings import Settings

SIGN_IN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:CHAOS_PW"}},
    "done_when": "Welcome",
}
DEVICES = ("full-1", "full-2", "full-3", "full-4")
POOL = {"labels": {"pool": "full"}}
OOM_HOLD_S = 8.0
"""How long Redis stays full: past several heartbeats and restore sweeps (4 s apart)."""
FATAL = ("Unrecoverable error",)


def full_settings(url: str) -> Settings:
    """Chaos timers, but a run and a lease outlive the outage: soft/hard limits 30/35 s (a
    run waits through the outage instead of being sent again), lease 20 s. A read-only Redis
    refuses the lease renewal too (a full one accepts its PEXPIRE), and a worker whose lease
    went unrenewed longer than its validity stands down (fencing, `workers.fleet.fence`)."""
    return chaos_settings(
        url,
        soft_time_limit_s=30,
        time_limit_s=35,
        lease_s=20.0,
        orphan_after_s=5.0,
    )


@pytest.fixture
def plain_redis() -> Iterator[LocalRedis]:
    """A fresh Redis with nothing on disk: killed and started again, it comes back empty."""
    server = LocalRedis()
    try:
        server.start(timeout_s=15)
        yield server
    finally:
        server.stop()


def used_memory(db: redis.Redis) -> int:
    return int(cast("dict[str, int]", db.info("memory"))["used_memory"])


def fill(db: redis.Redis, *, headroom: int = 2 * 1024 * 1024) -> int:
    """Set `maxmemory` a little above what Redis uses and write ballast until it refuses a
    write (OOM under `noeviction`); then pin `maxmemory` 1 MB below what is used, so client
    buffers that come and go cannot let writes in again. Returns the ballast bytes."""
    db.config_set("maxmemory", used_memory(db) + headroom)
    written = 0
    chunk = "x" * 32 * 1024
    for i in range(10_000):
        try:
            db.set(f"ballast:{i}", chunk)
        except redis.exceptions.OutOfMemoryError:
            db.config_set("maxmemory", used_memory(db) - 1024 * 1024)
            return written
        written += len(chunk)
    raise AssertionError("Redis never refused a write")


def refuses_writes(db: redis.Redis) -> bool:
    try:
        db.set("probe", "x")
    except redis.exceptions.OutOfMemoryError:
        return True
    return False


def worker_exits(fleet: LocalFleet) -> list[str]:
    return sorted(d for d, child in fleet.workers.items() if not child.alive())


def fatal_lines(log_dir: Path) -> list[str]:
    return [
        f"{p.name}: {line}"
        for p in sorted(log_dir.glob("worker-*.log"))
        for line in p.read_text(errors="replace").splitlines()
        if any(f in line for f in FATAL)
    ]


def wait_terminal(
    http: httpx.Client, ids: list[str], timeout_s: float
) -> dict[str, dict[str, object]]:
    deadline = time.monotonic() + timeout_s
    finished: dict[str, dict[str, object]] = {}
    while time.monotonic() < deadline and len(finished) < len(ids):
        for i in ids:
            if i in finished:
                continue
            rec = http.get(f"/v1/runs/{i}")
            if rec.status_code == 200 and RunStatus(rec.json()["status"]).terminal:
                finished[i] = rec.json()
        time.sleep(0.25)
    return finished


def registered(db: redis.Redis, prefix: str) -> set[str]:
    return cast("set[str]", db.smembers(f"{prefix}:devices"))


@contextlib.contextmanager
def pool_fleet(
    settings: Settings, devices: tuple[str, ...], log_dir: Path
) -> Iterator[tuple[LocalFleet, httpx.Client, redis.Redis]]:
    """The API, the scheduler and one sim worker per device (pool `full`), all up; an
    authenticated HTTP client and a Redis client beside them. Everything stops on the way out."""
    fleet = LocalFleet(
        settings, log_dir=log_dir, extra_env={"GOALFLEET_SECRET_CHAOS_PW": SECRET_VALUE}
    )
    db = redis.Redis.from_url(settings.redis_url, decode_responses=True)
    try:
        fleet.start_all(
            [SimWorker(d, "ios", labels={"pool": "full"}, latency_scale=0.3) for d in devices],
            timeout_s=90,
        )
        with httpx.Client(
            base_url=fleet.api_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15
        ) as http:
            yield fleet, http, db
    finally:
        fleet.stop()
        db.close()


@dataclass(frozen=True)
class Outage:
    """A kind of Redis trouble the fleet must ride out: how to start it (returns numbers for
    the report), whether Redis still refuses a write, how to end it."""

    name: str
    start: Callable[[redis.Redis], dict[str, int]]
    refused: Callable[[redis.Redis], bool]
    end: Callable[[redis.Redis], object]


def _read_only(db: redis.Redis) -> dict[str, int]:
    db.replicaof("127.0.0.1", free_port())  # a replica of nobody: writes get READONLY
    return {}


def _refuses_as_replica(db: redis.Redis) -> bool:
    try:
        db.set("probe", "x")
    except redis.exceptions.ReadOnlyError:
        return True
    return False


FULL = Outage(
    "full",
    lambda db: {"ballast_bytes": fill(db)},
    refuses_writes,
    lambda db: db.config_set("maxmemory", 0),  # the ballast stays
)
READ_ONLY = Outage(
    "read-only", _read_only, _refuses_as_replica, lambda db: db.replicaof("NO", "ONE")
)


@pytest.mark.parametrize("outage", [FULL, READ_ONLY], ids=lambda o: o.name)
def test_a_full_redis_is_an_outage_not_a_crash(  # noqa: PLR0915 - one scenario end to end: start, fill, free, check, report
    plain_redis: LocalRedis, tmp_path: Path, outage: Outage
) -> None:
    """Fill Redis (or make it a read-only replica) while a burst of runs is under way and
    keep it so for 8 s: every worker stays up and keeps its device registered; once Redis
    takes writes again, every run accepted before (and after) finishes `done` and every
    device is alive again."""
    settings = full_settings(plain_redis.url)
    prefix = settings.key_prefix
    with pool_fleet(settings, DEVICES, tmp_path) as (fleet, http, db):
        batch = http.post("/v1/batches", json={**SIGN_IN, "selector": POOL, "count": 16})
        assert batch.status_code == 201, batch.text
        ids: list[str] = batch.json()["runs"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # fill it while runs are mid-way
            running = [i for i in ids if db.hget(f"{prefix}:run:{i}", "status") == "running"]
            if running and db.hlen(f"{prefix}:run:{running[0]}:steps") >= 1:
                break
            time.sleep(0.02)
        started = outage.start(db)
        t_full = time.monotonic()
        running_at_full = {i for i in ids if db.hget(f"{prefix}:run:{i}", "status") == "running"}

        # -- Redis full: submits are refused, workers wait ----------------------------------
        codes: Counter[int] = Counter()
        retry_after: set[str | None] = set()
        while time.monotonic() - t_full < OOM_HOLD_S:
            resp = http.post("/v1/runs", json={**SIGN_IN, "selector": POOL})
            codes[resp.status_code] += 1
            retry_after.add(resp.headers.get("Retry-After"))
            if resp.status_code == 201:
                ids.append(resp.json()["id"])
            time.sleep(0.5)
        still_full = outage.refused(db)
        exits_while_full = worker_exits(fleet)
        devices_while_full = registered(db, prefix)
        outage.end(db)
        t_free = time.monotonic()

        # -- memory freed: everything carries on ---------------------------------------------
        after = http.post("/v1/runs", json={**SIGN_IN, "selector": POOL})
        assert after.status_code == 201, after.text
        ids.append(after.json()["id"])
        finished = wait_terminal(http, ids, timeout_s=60)
        all_done_s = time.monotonic() - t_free
        assert still_full
        assert set(codes) == {503}, codes  # nothing accepted, nothing half-written
        assert None not in retry_after
        assert not exits_while_full, (exits_while_full, fatal_lines(tmp_path))
        assert devices_while_full == set(DEVICES)
        assert len(finished) == len(ids), f"not terminal: {set(ids) - set(finished)}"
        statuses = Counter(str(r["status"]) for r in finished.values())
        assert statuses == Counter({"done": len(ids)}), {
            i: (r["status"], r["attempt"], r["reason"]) for i, r in finished.items()
        }
        # the runs that were mid-way when Redis filled kept their device and their attempt
        assert running_at_full
        assert {i: finished[i]["attempt"] for i in running_at_full} == dict.fromkeys(
            running_at_full, 1
        )
        fleet.wait_devices(list(DEVICES), timeout_s=30)  # every lease back
        assert not worker_exits(fleet), fatal_lines(tmp_path)
        assert registered(db, prefix) == set(DEVICES)
        assert not fatal_lines(tmp_path)
        report = {
            "outage": outage.name,
            "runs": len(ids),
            **started,
            "full_s": round(t_free - t_full, 1),
            "submits_while_full": dict(sorted(codes.items())),
            "worker_exits": 0,
            "devices_lost": len(set(DEVICES) - registered(db, prefix)),
            "running_when_full": len(running_at_full),
            "max_attempt": max(int(str(r["attempt"])) for r in finished.values()),
            "all_done_after_free_s": round(all_done_s, 2),
        }
        name = "redis_full" if outage is FULL else "redis_read_only"
        report_path(name).write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report))  # noqa: T201 - the numbers for docs/reliability.md


def test_a_wiped_redis_is_repaired(plain_redis: LocalRedis, tmp_path: Path) -> None:
    """Redis killed and started again empty (no persistence: a failover to an empty replica,
    a FLUSHALL): every worker registers its device again within two lease periods, none
    exits, and runs submitted afterwards finish `done`."""
    settings = chaos_settings(plain_redis.url)
    prefix = settings.key_prefix
    devices = DEVICES[:3]
    with pool_fleet(settings, devices, tmp_path) as (fleet, http, db):
        plain_redis.kill()
        plain_redis.start()
        t_up = time.monotonic()
        assert db.dbsize() <= len(devices) * 3  # empty but for what workers wrote since
        deadline = t_up + 30
        while time.monotonic() < deadline:
            leases = [db.exists(f"{prefix}:device:{d}:lease") for d in devices]
            if registered(db, prefix) == set(devices) and all(leases):
                break
            time.sleep(0.05)
        repaired_s = time.monotonic() - t_up
        assert registered(db, prefix) == set(devices), fatal_lines(tmp_path)
        assert repaired_s <= 2 * settings.lease_s, repaired_s
        batch = http.post("/v1/batches", json={**SIGN_IN, "selector": POOL, "count": 6})
        assert batch.status_code == 201, batch.text
        ids: list[str] = batch.json()["runs"]
        finished = wait_terminal(http, ids, timeout_s=60)
        all_done_s = time.monotonic() - t_up
        assert len(finished) == len(ids), f"not terminal: {set(ids) - set(finished)}"
        assert {str(r["status"]) for r in finished.values()} == {"done"}, finished
        assert not worker_exits(fleet), fatal_lines(tmp_path)
        report = {
            "devices": len(devices),
            "lease_s": settings.lease_s,
            "re_registered_after_s": round(repaired_s, 2),
            "worker_exits": 0,
            "runs_after": len(ids),
            "all_done_after_restart_s": round(all_done_s, 2),
        }
        report_path("redis_wiped").write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report))  # noqa: T201 - the numbers for docs/reliability.md
