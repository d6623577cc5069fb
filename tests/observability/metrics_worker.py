"""A real prefork Celery worker for the multiprocess metrics test (run as a script).

    PROMETHEUS_MULTIPROC_DIR=<dir> python metrics_worker.py <redis-url> <port-file>

It wires telemetry exactly as `goalfleet worker` does (`setup_worker_telemetry` in the main
process, before the pool forks) and runs one pool child per task (`--max-tasks-per-child=1`),
so every task records its metrics in a different process. The task plays a run through the
`MetricsObserver` hooks; with `die=True` it SIGKILLs its own pool child mid-run.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from celery import Celery

from workers.core.model import (
    Action,
    ActionKind,
    Decision,
    Outcome,
    Platform,
    RunResult,
    RunStatus,
    StepRow,
    TokenUsage,
)
from workers.core.records import DeviceInfo, RunRecord
from workers.core.request import GoalRunRequest
from workers.telemetry.metrics_observer import MetricsObserver
from workers.telemetry.setup import setup_worker_telemetry

QUEUE = "obs"


def make_app(redis_url: str) -> Celery:
    app = Celery("obs", broker=redis_url, backend=redis_url, set_as_current=False)
    app.conf.update(
        worker_hijack_root_logger=False,
        task_acks_late=False,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
    )
    observer = MetricsObserver(Platform.IOS)

    @app.task(name="obs.run")
    def run(run_id: str, status: str, *, die: bool = False) -> int:
        record = RunRecord(
            id=run_id, request=GoalRunRequest(goal="Sign in"), submitted_at=time.time() - 1.5
        )
        observer.run_started(record, 1)
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        row = StepRow(
            index=1,
            screen="Sign in",
            refs_generation="1",
            candidates=3,
            decision=Decision(target="e1", usage=TokenUsage(input_tokens=100, output_tokens=7)),
            action=Action(kind=ActionKind.PRESS, ref="e1", pinned="@e1~s1"),
            outcome=Outcome.ACTED,
            snapshot_ms=20,
            decide_ms=1500,
            action_ms=80,
        )
        observer.step(record, row)
        observer.run_finished(
            record,
            RunResult(status=RunStatus(status), goal="Sign in", steps=(row,), duration_ms=1600),
        )
        return os.getpid()

    return app


def main() -> None:
    redis_url, port_file = sys.argv[1], Path(sys.argv[2])
    info = DeviceInfo(id="obs-1", platform=Platform.IOS)
    telemetry = setup_worker_telemetry(
        info, "w@obs-1", dict(os.environ), log_level="WARNING", log_format="json", metrics_port=0
    )
    port_file.write_text(str(telemetry.server.port if telemetry.server else 0))
    app = make_app(redis_url)
    try:
        app.worker_main(
            argv=[
                "worker",
                "--pool=prefork",
                "--concurrency=1",
                "--max-tasks-per-child=1",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                f"--queues={QUEUE}",
                "--hostname=w@obs-1",
                "--loglevel=WARNING",
            ]
        )
    finally:
        telemetry.stop()


if __name__ == "__main__":
    main()
