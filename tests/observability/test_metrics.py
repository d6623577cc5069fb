"""Worker metrics: what the observer records, and that a prefork worker exports them right."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery import Celery
from obs_support import (
    EMAIL,
    SECRET,
    fresh_logging,  # noqa: F401 - an autouse fixture, found by name
    make_record,
    scrape,
    total,
)
from prometheus_client import CollectorRegistry, generate_latest

from scheduler.local.redis import LocalRedis
from workers.core.device_hooks import with_hooks
from workers.core.loop import run_goal
from workers.core.model import Inputs, Platform, RunStatus
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import Faults, make_sim_device
from workers.processes import spawn
from workers.telemetry import metrics
from workers.telemetry.metrics import WorkerMetrics
from workers.telemetry.metrics_observer import DeviceMetrics, MetricsObserver

HERE = Path(__file__).parent


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_observer_records_a_sim_run() -> None:
    """A real sim run through the observer: phases per outcome, runs by status, queue wait,
    stale re-snapshots, transient errors, busy back to 0 — labelled by platform, never run."""
    registry = CollectorRegistry()
    m = WorkerMetrics.create(registry)
    obs = MetricsObserver(Platform.IOS, m)
    record = make_record(submitted_ago_s=3.0)
    faults = Faults(stale_on=frozenset({3}), transient_on=frozenset({1}))
    device = with_hooks(
        make_sim_device("sim:signin-ios", faults=faults), DeviceMetrics(Platform.IOS, m)
    )
    obs.run_started(record, 2)
    assert value(registry, "goalfleet_worker_busy", platform="ios") == 1
    result = run_goal(
        device,
        "Sign in",
        decider=RulesDecider(),
        inputs=Inputs.of({"email": EMAIL}, {"password": SECRET}),
        on_step=lambda row: obs.step(record, row),
        sleep=lambda _: None,
    )
    obs.run_finished(record, result)

    assert result.status is RunStatus.DONE
    assert value(registry, "goalfleet_runs_total", platform="ios", status="done") == 1
    assert value(registry, "goalfleet_worker_busy", platform="ios") == 0
    assert value(registry, "goalfleet_run_redeliveries_total", platform="ios") == 1
    assert value(registry, "goalfleet_stale_ref_resnapshots_total", platform="ios") == 1
    assert (
        value(
            registry, "goalfleet_device_transient_errors_total", platform="ios", command="snapshot"
        )
        == 1
    )
    wait = value(registry, "goalfleet_queue_wait_seconds_sum", platform="ios")
    assert 3.0 <= wait < 10
    snapshots = sum(
        value(
            registry,
            "goalfleet_step_phase_seconds_count",
            phase="snapshot",
            platform="ios",
            outcome=o.value,
        )
        for o in {row.outcome for row in result.steps}
    )
    assert snapshots == len(result.steps)
    acted = sum(1 for r in result.steps if r.outcome.value == "acted")
    assert (
        value(
            registry,
            "goalfleet_step_phase_seconds_count",
            phase="action",
            platform="ios",
            outcome="acted",
        )
        == acted
    )
    assert value(registry, "goalfleet_steps_total", platform="ios", outcome="stale") == 1
    assert (
        value(registry, "goalfleet_run_duration_seconds_count", platform="ios", status="done") == 1
    )
    text = generate_latest(registry).decode()
    assert "run-1" not in text
    assert 'le="60.0"' in text
    assert 'le="0.01"' in text


def test_decide_cost_counts_every_decider_of_the_chain() -> None:
    """A step whose chain asked two priced deciders adds both calls' cost to
    goalfleet_decide_cost_total (what the run paid, not only the answer it used)."""
    from workers.core.model import Attempt, Decision, Outcome, StepRow, TokenUsage  # noqa: PLC0415

    registry = CollectorRegistry()
    obs = MetricsObserver(Platform.IOS, WorkerMetrics.create(registry))
    first = Decision(target="e1", confidence=0.2, usage=TokenUsage(cost=0.002))
    second = Decision(blocked=True, usage=TokenUsage(cost=0.005))
    row = StepRow(
        index=1, screen="s", refs_generation="1", candidates=1, outcome=Outcome.BLOCKED,
        decision=second,
        attempts=(Attempt(decider="a/x", decision=first, escalated="low"),
                  Attempt(decider="a/y", decision=second)),
    )  # fmt: skip
    obs.step(make_record(), row)
    assert value(registry, "goalfleet_decide_cost_total", platform="ios") == pytest.approx(0.007)


def test_decide_tokens_counted_by_direction() -> None:
    """Token usage on decisions adds to goalfleet_decide_tokens_total{direction=...}."""
    from workers.core.model import Decision, Outcome, StepRow, TokenUsage  # noqa: PLC0415

    registry = CollectorRegistry()
    obs = MetricsObserver(Platform.ANDROID, WorkerMetrics.create(registry))
    row = StepRow(
        index=1, screen="s", refs_generation="1", candidates=1, outcome=Outcome.BLOCKED,
        decision=Decision(blocked=True, usage=TokenUsage(input_tokens=300, output_tokens=12)),
    )  # fmt: skip
    obs.step(make_record(), row)
    obs.step(make_record(), row)
    assert (
        value(registry, "goalfleet_decide_tokens_total", platform="android", direction="input")
        == 600
    )
    assert (
        value(registry, "goalfleet_decide_tokens_total", platform="android", direction="output")
        == 24
    )
    # no action was taken: the action phase is not observed (a zero would skew it)
    assert (
        value(
            registry,
            "goalfleet_step_phase_seconds_count",
            phase="action",
            platform="android",
            outcome="blocked",
        )
        == 0
    )


def test_wipe_and_reap(tmp_path: Path) -> None:
    """The start wipe removes old files; reaping drops live gauges of dead pids only."""
    (tmp_path / "counter_1.db").write_bytes(b"x")
    metrics.wipe_multiproc_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = int(dead.stdout)
    for name in (f"gauge_livesum_{dead_pid}.db", f"gauge_livesum_{os.getpid()}.db",
                 f"counter_{dead_pid}.db"):  # fmt: skip
        (tmp_path / name).write_bytes(b"")
    assert metrics.reap_dead_processes(tmp_path) == [dead_pid]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"gauge_livesum_{os.getpid()}.db", f"counter_{dead_pid}.db"]
    )


@pytest.fixture
def redis_url():
    with LocalRedis() as server:
        yield server.url


def test_counts_survive_pool_child_restarts_and_kills(tmp_path: Path, redis_url: str) -> None:
    """A real prefork worker with one pool child per task (and one child SIGKILLed mid-run):
    the one endpoint in the main process reports every run, and no busy gauge is left over."""
    mpdir = tmp_path / "mp"
    mpdir.mkdir()
    (mpdir / "counter_999999.db").write_bytes(b"junk from an earlier worker")
    port_file = tmp_path / "port"
    env = {**os.environ, metrics.MULTIPROC_ENV: str(mpdir)}
    proc = spawn(
        [sys.executable, str(HERE / "metrics_worker.py"), redis_url, str(port_file)],
        env=env,
        log=tmp_path / "worker.log",
    )
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text()):
            assert proc.alive(), proc.tail()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}/metrics"
        client = Celery("obs", broker=redis_url, backend=redis_url, set_as_current=False)
        statuses = ["done", "done", "blocked", "done", "escalated"]
        pids = []
        for i, status in enumerate(statuses):
            r = client.send_task("obs.run", args=[f"r{i}", status], queue="obs")
            pids.append(r.get(timeout=30))
        client.send_task("obs.run", args=["dies", "done"], kwargs={"die": True}, queue="obs")
        last = client.send_task("obs.run", args=["r-last", "done"], queue="obs")
        pids.append(last.get(timeout=60))
        assert len(set(pids)) == len(pids), "each task ran in its own pool child"
        assert proc.alive()

        samples = scrape(url)
        assert total(samples, "goalfleet_runs_total", status="done") == 4
        assert total(samples, "goalfleet_runs_total", status="blocked") == 1
        assert total(samples, "goalfleet_runs_total", status="escalated") == 1
        assert total(samples, "goalfleet_runs_total") == 6
        # the killed child started a run: its queue-wait sample stays counted
        assert total(samples, "goalfleet_queue_wait_seconds_count") == 7
        assert total(samples, "goalfleet_step_phase_seconds_count", phase="decide") == 6
        assert total(samples, "goalfleet_decide_tokens_total", direction="input") == 600
        # live gauges: the killed child's busy=1 is reaped, the worker's info stays
        assert total(samples, "goalfleet_worker_busy") == 0
        assert total(samples, "goalfleet_worker_info", device="obs-1") == 1
        assert not (mpdir / "counter_999999.db").exists(), "wiped at start"
        assert not list(mpdir.glob(f"gauge_livesum_{pids[0]}.db")), "mark_process_dead ran"
    finally:
        proc.stop(grace_s=15)
