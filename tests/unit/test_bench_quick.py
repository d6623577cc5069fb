"""The benchmarks still run (quick mode). They report figures; nothing here asserts a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # each starts processes and runs for many seconds: `make test` only


@pytest.mark.parametrize(
    "module",
    [
        "bench.bench_loop",
        "bench.bench_journey",
        "bench.bench_tokens",
        # these start their own redis-server, API, scheduler and worker processes
        "bench.bench_dispatch",
        "bench.bench_scaling",
        "bench.bench_memory",
        "bench.bench_decision_memory",
        "bench.bench_flood",
        "bench.bench_scheduler",
        "bench.bench_idle_pick",
        "bench.bench_submit_cpu",
        "bench.bench_replication_wait",  # a master and its replica (SentinelLab)
        "bench.bench_api_rate",
        "bench.bench_screenshots",
        "bench.bench_cli_start",
        "bench.bench_throughput",
        "bench.bench_run_cpu",  # the run task's body in this one process
        "bench.bench_ceiling",  # the same path; Redis CPU and commands per run, and WAIT 1
        "bench.bench_send",  # the sender's CPU per message, by the Celery call
        "bench.bench_history",  # a scratch database on the machine's PostgreSQL
    ],
)
def test_benchmark_runs_in_quick_mode(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", module, "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| --- |" in proc.stdout  # it printed its markdown table
