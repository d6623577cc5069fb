"""A worker host cut off from Redis for longer than its lease, while runs keep coming.

Five hosts, each its own network namespace on one private switch: Redis; the control host
(`goalfleet api` + `goalfleet scheduler`); worker hosts A (device `part-a`) and B (`part-b`);
host C, where a supervisor starts a replacement worker for `part-a` once A's lease lapsed.
Host A's switch port goes down while it is in the middle of a run, for `PARTITION_S`, then comes
back. Every process is real (`goalfleet` commands, redis-server, Celery prefork workers with sim
devices); the test itself talks to the API from a thread inside the control host.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from actionkit import Action, device_overlaps, read_actions, run_overlaps, run_seed
from pydantic import SecretStr
from reportkit import report_path

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import SimWorker
from scheduler.local.redis import find_redis_server
from testing.netns import Inside, NetLab
from workers.core.model import RunStatus
from workers.core.records import RunRecord
from workers.processes import Child, spawn, stop_all
from workers.settings import Settings

TOKEN = "partition-test-token"
SECRET_VALUE = "partition-Secret-5521"
SIGN_IN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:PART_PW"}},
    "done_when": "Welcome",
    "selector": {"labels": {"pool": "part"}},
}
REDIS_PORT = 6390
API_PORT = 8787
LEASE_S = 6.0
"""Generous for a loaded machine: a worker whose beats are late by most of a lease stands down."""
PARTITION_S = 20.0
"""At least three leases (and until the replacement has driven the device): A's lease lapses,
the replacement registers and takes runs, all while A is cut off."""
MAX_PARTITION_S = 120.0
AFTER_HEAL_S = 6.0
SUBMIT_EVERY_S = 1.0
LATENCY = 0.3
"""Sim latency scale: a sign-in run takes about 1.5 s, so the cut lands mid-run."""
STAND_DOWN_EXIT = 3
"""The exit status of a worker that lost its lease (`goalfleet worker` exit codes: 3)."""


def _settings(lab: NetLab) -> Settings:
    return Settings.model_validate(
        {
            "redis_url": f"redis://{lab.address('redis')}:{REDIS_PORT}/0",
            "key_prefix": "gfpart",
            "api_tokens": [SecretStr(TOKEN)],
            "api_url": f"http://{lab.address('ctl')}:{API_PORT}",
            "heartbeat_interval_s": 1.0,
            "lease_s": LEASE_S,
            "dispatch_interval_s": 0.25,
            "soft_time_limit_s": 6,
            "time_limit_s": 8,
            "visibility_timeout_s": 10,
            "attempt_cap": 3,
            "quarantine_after": 50,
            "orphan_after_s": 5.0,
            "retention_s": 3600,
        }
    )


@dataclass
class Worker:
    host: str
    spec: SimWorker
    child: Child | None = None

    @property
    def name(self) -> str:
        return f"{self.spec.device}@{self.host}"


@dataclass
class Submitted:
    run_id: str
    phase: str  # "before", "partition" or "after" (the heal)
    at: float


@dataclass
class Scenario:
    """The fleet on the lab, and what happened when (monotonic seconds)."""

    lab: NetLab
    settings: Settings
    tmp: Path
    ctl: Inside
    api: FleetClient
    env: dict[str, str]
    workers: dict[str, Worker] = field(default_factory=dict)
    children: list[Child] = field(default_factory=list)
    submitted: list[Submitted] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def spawn(self, host: str, argv: list[str], name: str) -> Child:
        env = (
            self.env
            if name.startswith("worker-")
            else {  # secrets are the workers' alone
                k: v for k, v in self.env.items() if not k.startswith("GOALFLEET_SECRET_")
            }
        )
        child = spawn(self.lab.argv(host, argv), env=env, log=self.tmp / f"{name}.log", name=name)
        self.children.append(child)
        return child

    def start_worker(self, host: str, device: str) -> Worker:
        spec = SimWorker(
            device,
            "android",
            labels={"pool": "part"},
            latency_scale=LATENCY,
            session_log=self.tmp / f"sessions-{device}@{host}.log",
        )
        w = Worker(host, spec)
        w.child = self.spawn(host, spec.argv(), f"worker-{w.name}")
        self.workers[w.name] = w
        return w

    def call(self, fn: Callable[..., Any], *args: object) -> Any:
        return self.ctl.call(fn, *args)

    def devices(self) -> dict[str, Any]:
        return {d.info.id: d for d in self.call(self.api.devices)}

    def submit(self, phase: str) -> None:
        rec: RunRecord = self.call(self.api.submit_run, SIGN_IN)
        self.submitted.append(Submitted(rec.id, phase, time.monotonic()))

    def runs(self) -> dict[str, RunRecord]:
        return {s.run_id: self.call(self.api.run, s.run_id) for s in self.submitted}

    def wait_for(self, what: str, ok: Callable[[], bool], timeout_s: float) -> None:
        if not self.poll(ok, timeout_s):
            raise AssertionError(f"{what}: not within {timeout_s:g} s\n{self.describe()}")

    @staticmethod
    def poll(ok: Callable[[], bool], timeout_s: float) -> bool:
        """Whether `ok()` came true within `timeout_s` (checked every 0.1 s)."""
        deadline = time.monotonic() + timeout_s
        while not ok():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def describe(self) -> str:
        tails = "\n".join(
            f"--- {c.name} (exit {c.returncode})\n{c.tail(1500)}" for c in self.children
        )
        return f"report: {json.dumps(self.report, indent=1, default=str)}\n{tails}"


def _start(s: Scenario) -> None:
    s.spawn(
        "redis",
        [
            find_redis_server(),
            "--bind", s.lab.address("redis"),
            "--port", str(REDIS_PORT),
            "--save", "",
            "--appendonly", "no",
            "--protected-mode", "no",
            "--dir", str(s.tmp),
        ],
        "redis",
    )  # fmt: skip
    py = [sys.executable, "-m", "scheduler"]
    s.spawn("ctl", [*py, "api", "--host", s.lab.address("ctl"), "--port", str(API_PORT)], "api")
    s.spawn("ctl", [*py, "scheduler"], "scheduler")
    s.start_worker("host-a", "part-a")
    s.start_worker("host-b", "part-b")

    def up() -> bool:
        try:
            devices = s.devices()
        except Exception:  # noqa: BLE001 - the API (or Redis behind it) is still starting
            return False
        return all(d in devices and devices[d].alive for d in ("part-a", "part-b"))

    s.wait_for("the fleet came up", up, timeout_s=120)


def _wait_a_mid_run(s: Scenario, timeout_s: float) -> str:
    """Until worker A is executing a run and has taken a step of it (submitting runs while
    fewer than four are waiting or running); that run's id."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = s.devices()["part-a"].run
        if run:
            rec: RunRecord = s.call(s.api.run, run)
            if rec.status is RunStatus.RUNNING and s.call(s.api.steps, run):
                return run
        if sum(not r.status.terminal for r in s.runs().values()) < 4:
            s.submit("before")
        time.sleep(0.05)
    raise AssertionError(f"worker A was never mid-run within {timeout_s:g} s\n{s.describe()}")


def _partition(s: Scenario) -> None:
    """Cut host A mid-run; submit a run every SUBMIT_EVERY_S; start the replacement on host C
    once A's lease lapsed; heal once PARTITION_S passed and the replacement has driven the
    device; submit for AFTER_HEAL_S more."""
    s.report["in_flight_at_cut"] = _wait_a_mid_run(s, timeout_s=90)
    s.lab.cut("host-a")
    s.marks["cut"] = time.monotonic()
    s.marks["cut_wall"] = time.time()
    replacement: Worker | None = None
    while not (time.monotonic() > s.marks["cut"] + PARTITION_S and _has_acted(replacement)):
        if time.monotonic() > s.marks["cut"] + MAX_PARTITION_S:
            raise AssertionError(
                f"the replacement never drove part-a within {MAX_PARTITION_S:g} s of the cut\n"
                f"{s.describe()}"
            )
        s.submit("partition")
        if replacement is None and not s.devices()["part-a"].alive:
            s.marks["lease_lapsed"] = time.monotonic()
            replacement = s.start_worker("host-c", "part-a")  # as a supervisor on host C would
        if replacement is not None and "replaced" not in s.marks:
            d = s.devices()["part-a"]
            if d.alive and (d.registered_at or 0) > s.marks["cut_wall"]:
                s.marks["replaced"] = time.monotonic()
        time.sleep(SUBMIT_EVERY_S)
    s.lab.heal("host-a")
    s.marks["heal"] = time.monotonic()
    s.marks["heal_wall"] = time.time()
    while time.monotonic() < s.marks["heal"] + AFTER_HEAL_S:
        s.submit("after")
        time.sleep(SUBMIT_EVERY_S)


def _has_acted(w: Worker | None) -> bool:
    """The worker has driven its device (its sim device logged a command)."""
    return (
        w is not None
        and w.spec.session_log is not None
        and bool(read_actions(w.spec.session_log, worker=w.name, device=w.spec.device))
    )


def _actions(s: Scenario) -> list[Action]:
    out: list[Action] = []
    for w in s.workers.values():
        assert w.spec.session_log is not None
        out += read_actions(w.spec.session_log, worker=w.name, device=w.spec.device)
    return out


def test_partitioned_worker_stands_down_and_nothing_is_lost_or_doubled(
    lab: NetLab, tmp_path: Path
) -> None:
    """Host A is cut off from Redis for over three leases mid-run while runs keep coming: the runs
    submitted meanwhile finish on the reachable devices (B, and `part-a` through its
    replacement on host C); A stands down (exit status 3 once healed) and never drives its device
    after its lease lapsed; every accepted run ends `done`; no device is driven by two workers
    at once and no run by two at once (the sim devices' action logs)."""
    settings = _settings(lab)
    env = {**os.environ, **settings.to_env(), "GOALFLEET_SECRET_PART_PW": SECRET_VALUE}
    with ExitStack() as stack:
        ctl = stack.enter_context(lab.inside("ctl"))
        api = ctl.call(lambda: FleetClient(settings.api_url, token=TOKEN, timeout_s=30))
        stack.callback(ctl.call, api.close)
        s = Scenario(lab, settings, tmp_path, ctl, api, env)
        stack.callback(lambda: stop_all(s.children, 15))
        t0 = time.monotonic()
        _start(s)
        _partition(s)
        a = s.workers["part-a@host-a"].child
        assert a is not None
        if s.poll(lambda: a.returncode is not None, timeout_s=60):
            s.marks["a_exited"] = time.monotonic()
        s.poll(lambda: all(r.status.terminal for r in s.runs().values()), timeout_s=120)
        runs = s.runs()
        s.marks["end"] = time.monotonic()
        a_status = a.returncode  # before the teardown stops a worker that never stood down
        stop_all(s.children, 15)
        _check(s, runs, a_status, t0)


def _since(marks: dict[str, float], start: str, end: str) -> float | None:
    if start not in marks or end not in marks:
        return None
    return round(marks[end] - marks[start], 1)


def _stood_down_after(s: Scenario, worker: str, since_wall: float) -> float | None:
    """Seconds from `since_wall` to the worker's `lease_lost_standing_down` log line (when it
    stopped consuming; it exits once its shutdown completes), None without one."""
    for line in (s.tmp / f"worker-{worker}.log").read_text(errors="replace").splitlines():
        if '"lease_lost_standing_down"' not in line:
            continue
        with contextlib.suppress(ValueError, KeyError):
            at = datetime.fromisoformat(json.loads(line)["timestamp"]).timestamp()
            return round(at - since_wall, 1)
    return None


def _check(s: Scenario, runs: dict[str, RunRecord], a_status: int | None, t0: float) -> None:
    m = s.marks
    actions = _actions(s)
    cut_ns = int(m["cut"] * 1e9)
    heal_ns = int(m["heal"] * 1e9)
    a_after_cut = [x for x in actions if x.worker == "part-a@host-a" and x.end_ns > cut_ns]
    a_ends = [x.end_ns for x in actions if x.worker == "part-a@host-a"]
    during = [x for x in s.submitted if x.phase == "partition"]
    seeds_during = {run_seed(x.run_id) for x in during}
    device_bad = device_overlaps(actions)
    run_bad = run_overlaps(actions)
    statuses: dict[str, int] = {}
    for r in runs.values():
        statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
    in_flight = runs.get(s.report.get("in_flight_at_cut") or "")
    s.report |= {
        "runs": len(runs),
        "submitted": {
            p: sum(x.phase == p for x in s.submitted) for p in ("before", "partition", "after")
        },
        "statuses": statuses,
        "lost": sum(not r.status.terminal for r in runs.values()),
        "partition_s": _since(m, "cut", "heal"),
        "lease_lapsed_after_cut_s": _since(m, "cut", "lease_lapsed"),
        "replacement_registered_after_cut_s": _since(m, "cut", "replaced"),
        "replacement_runs_before_heal": len(
            {x.seed for x in actions if x.worker == "part-a@host-c" and x.start_ns < heal_ns}
        ),
        "a_last_action_after_cut_s": round((max(a_ends, default=cut_ns) - cut_ns) / 1e9, 2),
        "a_stood_down_after_cut_s": _stood_down_after(s, "part-a@host-a", m["cut_wall"]),
        "a_exited_after_heal_s": _since(m, "heal", "a_exited"),
        "a_exit_status": a_status,
        "a_actions_after_cut": len(a_after_cut),
        "partition_runs_done_before_heal": sum(
            (runs[x.run_id].finished_at or m["heal_wall"]) < m["heal_wall"] for x in during
        ),
        "in_flight_run": None
        if in_flight is None
        else {"status": in_flight.status.value, "attempt": in_flight.attempt},
        "device_overlaps": len(device_bad),
        "run_overlaps": len(run_bad),
        "elapsed_s": round(m["end"] - t0, 1),
    }
    report_path("partition").write_text(json.dumps(s.report, indent=2) + "\n")
    print(json.dumps(s.report))  # noqa: T201 - the numbers for docs/reliability.md
    not_done = {r.id: r.status.value for r in runs.values() if r.status is not RunStatus.DONE}
    a_drove = [x for x in a_after_cut if x.seed in seeds_during]
    lapsed_ns = int(m["lease_lapsed"] * 1e9)
    a_unleased = [x for x in a_after_cut if x.start_ns > lapsed_ns]
    failures = [*device_bad[:5], *run_bad[:5]]
    if a_status != STAND_DOWN_EXIT:
        failures.append(f"worker A exited {a_status}, not {STAND_DOWN_EXIT}")
    if not_done:
        failures.append(f"runs not done: {not_done}")
    if a_unleased:
        failures.append(f"A drove part-a {len(a_unleased)} times after its lease lapsed")
    if a_drove:
        failures.append(f"A drove runs submitted during the partition: {a_drove}")
    if s.report["partition_runs_done_before_heal"] == 0:
        failures.append("no run submitted during the partition finished before the heal")
    assert not failures, "\n".join(failures) + "\n" + s.describe()


pytestmark = pytest.mark.partition
