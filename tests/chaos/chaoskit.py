"""Chaos helpers: a fleet whose workers can be killed and restarted as a supervisor would, and
the session-log overlap check. (The restartable Redis with AOF on is
`scheduler.local.redis.LocalRedis(appendonly=True)`, see conftest.)

Every process started here is a `workers.processes.Child`, stopped with its process group.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from pydantic import SecretStr

from scheduler.local.fleet import LocalFleet, SimWorker
from workers.core.errors import ConfigError
from workers.settings import Settings

TOKEN = "chaos-test-token"
SECRET_VALUE = "chaos-Secret-27182"


def chaos_runs(default: int) -> int:
    """`GOALFLEET_CHAOS_RUNS` (the full configuration) or the quick CI default."""
    raw = os.environ.get("GOALFLEET_CHAOS_RUNS", "")
    return int(raw) if raw.strip() else default


def chaos_settings(url: str, **over: object) -> Settings:
    """Short limits so recovery shows in seconds. The sweep ends a run still `running`
    `time_limit_s + 2 * lease_s` after it started (11 s here); a killed pool child's run is
    sent again by its worker at once, a dead worker's re-pended within a lease."""
    base: dict[str, object] = {
        "redis_url": url,
        "key_prefix": "gfc",
        "api_tokens": [SecretStr(TOKEN)],
        "heartbeat_interval_s": 0.5,
        "lease_s": 3.0,
        "dispatch_interval_s": 0.25,
        "soft_time_limit_s": 4,
        "time_limit_s": 5,
        "attempt_cap": 3,
        "quarantine_after": 3,
        "probe_interval_s": 1.0,
        "orphan_after_s": 5.0,
        "retention_s": 3600,
    }
    base.update(over)
    return Settings.model_validate(base)


def children(pid: int) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
    ).stdout
    return [int(p) for p in out.split()]


@dataclass
class Kill:
    device: str
    kind: str  # "child" or "main"
    pids: tuple[int, ...]
    wall: float
    mono_ns: int
    run_id: str | None
    ready_wall: float | None = None
    """A main-process kill: when the restarted worker was consuming its queue again."""


@dataclass
class Supervised:
    """A LocalFleet whose workers a chaos thread kills; restarts them like systemd would
    (`Restart=always`, `KillMode=control-group`: the rest of the group goes too)."""

    fleet: LocalFleet
    specs: dict[str, SimWorker]
    kills: list[Kill] = field(default_factory=list)
    restarts: list[float] = field(default_factory=list)
    """Seconds from a main-process kill until the restarted worker's device was alive again."""
    ready: list[float] = field(default_factory=list)
    """Seconds from a main-process kill until the restarted worker consumed its queue again."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def pid(self, device: str) -> int | None:
        child = self.fleet.workers.get(device)
        return child.pid if child is not None and child.alive() else None

    def kill_child(self, device: str, run_id: str | None) -> bool:
        pid = self.pid(device)
        kids = children(pid) if pid else []
        if not kids:
            return False
        mono = time.monotonic_ns()
        for k in kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(k, signal.SIGKILL)
        with self.lock:
            self.kills.append(Kill(device, "child", tuple(kids), time.time(), mono, run_id))
        return True

    def kill_main(self, device: str, run_id: str | None) -> bool:
        child = self.fleet.workers.get(device)
        if child is None or not child.alive():
            return False
        kids = children(child.pid)
        mono = time.monotonic_ns()
        t0 = time.monotonic()
        child.signal(signal.SIGKILL, leader_only=True)
        child.wait(timeout=10)
        # the supervisor stops what is left of the unit (the orphaned pool child), then restarts
        child.signal(signal.SIGKILL)
        kill = Kill(device, "main", (child.pid, *kids), time.time(), mono, run_id)
        with self.lock:
            self.kills.append(kill)
        self.fleet.workers.pop(device, None)
        readies = self.readies(device)
        self.fleet.start_worker(self.specs[device])
        self.wait_registered(device, after=kill.wall)
        with self.lock:
            self.restarts.append(time.monotonic() - t0)
        self.wait_ready(device, more_than=readies)
        with self.lock:
            self.ready.append(time.monotonic() - t0)
            kill.ready_wall = time.time()
        return True

    def readies(self, device: str) -> int:
        """How often the device's worker said `worker_ready` (its log is appended to across
        restarts; the spec's log level must be INFO or lower)."""
        log = self.fleet.log_dir / f"worker-{device}.log"
        return log.read_bytes().count(b"worker_ready") if log.exists() else 0

    def wait_ready(self, device: str, *, more_than: int, timeout_s: float = 90.0) -> None:
        """Until the restarted worker's Celery consumer is up (registering comes first, before
        Celery starts: a worker registered is not yet taking its queue)."""
        deadline = time.monotonic() + timeout_s
        while self.readies(device) <= more_than:
            if time.monotonic() > deadline:
                raise ConfigError(f"worker for {device} was not ready within {timeout_s} s")
            time.sleep(0.05)

    def up_since_last_kill(self, device: str) -> bool:
        """The device's worker registered after the last main-process kill."""
        with self.lock:
            last = max(
                (k.wall for k in self.kills if k.device == device and k.kind == "main"), default=0.0
            )
        settings = self.fleet.settings
        db = redis.Redis.from_url(settings.redis_url, decode_responses=True)
        try:
            at = db.hget(f"{settings.key_prefix}:device:{device}", "registered_at")
        finally:
            db.close()
        return at is not None and float(at) > last and self.pid(device) is not None

    def wait_registered(self, device: str, *, after: float, timeout_s: float = 60.0) -> None:
        """Until the restarted worker has registered its device (after the dead one's lease
        expired) and is consuming."""
        settings = self.fleet.settings
        db = redis.Redis.from_url(settings.redis_url, decode_responses=True)
        key = f"{settings.key_prefix}:device:{device}"
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                at = db.hget(key, "registered_at")
                if at is not None and float(at) > after:
                    return
                time.sleep(0.05)
        finally:
            db.close()
        raise ConfigError(f"worker for {device} did not come back within {timeout_s} s")


def read_sessions(path: Path) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        what, pid, ns = line.split()
        out.append((what, int(pid), int(ns)))
    return out


def overlaps(path: Path, kills: list[Kill], *, now_ns: int) -> list[str]:
    """Sessions on one device that overlap in time. A session opened by a process that was
    later killed (no close line) ends at that kill; one still open ends `now_ns`."""
    killed_at: dict[int, int] = {}
    for k in kills:
        for pid in k.pids:
            killed_at.setdefault(pid, k.mono_ns)
    intervals: list[tuple[int, int, int]] = []
    open_by_pid: dict[int, int] = {}
    for what, pid, ns in read_sessions(path):
        if what == "open":
            if pid in open_by_pid:  # a second open in one process before a close: overlap
                intervals.append((open_by_pid[pid], ns, pid))
            open_by_pid[pid] = ns
        else:
            start = open_by_pid.pop(pid, None)
            if start is not None:
                intervals.append((start, ns, pid))
    for pid, start in open_by_pid.items():
        intervals.append((start, killed_at.get(pid, now_ns), pid))
    intervals.sort()
    bad = []
    for (s1, e1, p1), (s2, e2, p2) in itertools.pairwise(intervals):
        if s2 < e1:
            bad.append(f"{path.name}: pid {p1} [{s1}, {e1}] overlaps pid {p2} [{s2}, {e2}]")
    return bad


def flush_prefix(url: str, prefix: str) -> None:
    c = redis.Redis.from_url(url)
    try:
        for key in c.scan_iter(match=f"{prefix}:*", count=1000):
            c.delete(key)
    finally:
        c.close()
