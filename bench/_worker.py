"""Worker entry points for the fleet benchmarks (started by `bench/_fleet.py`).

    python -m bench._worker worker --device d1 ...   # `goalfleet worker`, plus bench/rules-<ms>
    python -m bench._worker noop READY_FILE          # a bare Celery worker with a no-op task

`worker` is exactly `goalfleet worker` with one more decider spec, **bench/rules-<ms>**: the
offline rules decider after sleeping `<ms>` milliseconds, a model's think time without a model
(no model server competing for the benchmark's two cores). It is added by wrapping
`workers.fleet.runtime.default_decider_maker` before the worker starts; production code is unchanged
and no production worker knows the spec.

`noop` is the dispatch benchmark's baseline: a Celery worker made by the same
`workers.fleet.celery_app.make_celery(settings)` and started with the same flags
(`workers.fleet.worker.worker_argv`: prefork, one child, prefetch 1, no gossip/mingle, events on),
serving only a no-op task on its own queue. The task's first act is to take
`time.monotonic_ns()` (`CLOCK_MONOTONIC`, like the sim device's `open` line) and append
`start <pid> <ns>` to `noop.starts` beside the ready file: when the task body started, for the
dispatch benchmark's one-way baseline (send → task body starts).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from workers.core.model import DecideState, Decision
from workers.core.ports import Decider
from workers.decide.rules import RulesDecider
from workers.fleet import runtime

BENCH_SPEC = "bench/rules-"
NOOP_DEVICE = "bench-noop"
NOOP_TASK = "bench.noop"


class SleepyRules:
    """`RulesDecider` that first sleeps: a fixed decide latency, no CPU."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.rules = RulesDecider()

    def decide(self, state: DecideState) -> Decision:
        time.sleep(self.delay_s)
        return self.rules.decide(state)


def _with_bench_spec(inner: runtime.DeciderMaker) -> runtime.DeciderMaker:
    def make(spec: str) -> Decider:
        if spec.startswith(BENCH_SPEC):
            return SleepyRules(float(spec.removeprefix(BENCH_SPEC)) / 1000)
        return inner(spec)

    return make


def noop_starts(directory: Path) -> Path:
    """The file the no-op task appends `start <pid> <monotonic ns>` to."""
    return directory / "noop.starts"


def _worker(argv: list[str]) -> int:
    default = runtime.default_decider_maker

    def maker(*args: Any, **kwargs: Any) -> runtime.DeciderMaker:  # noqa: ANN401 - passed through
        return _with_bench_spec(default(*args, **kwargs))

    runtime.default_decider_maker = maker
    from scheduler.cli.main import main  # noqa: PLC0415 - after the decider maker is wrapped

    return main(["worker", *argv])


def _noop(ready_file: Path) -> int:
    from celery import signals  # noqa: PLC0415 - Celery loads only in this process

    from workers.core.model import Platform  # noqa: PLC0415
    from workers.core.records import DeviceInfo  # noqa: PLC0415
    from workers.fleet.celery_app import make_celery  # noqa: PLC0415
    from workers.fleet.runtime import WorkerSpec  # noqa: PLC0415
    from workers.fleet.worker import worker_argv  # noqa: PLC0415
    from workers.settings import Settings  # noqa: PLC0415

    app = make_celery(Settings())
    starts = noop_starts(ready_file.parent)

    @app.task(name=NOOP_TASK, ignore_result=False)  # type: ignore[untyped-decorator]
    def noop() -> None:
        started = time.monotonic_ns()  # first: the one-way hop ends here
        with starts.open("a") as f:
            f.write(f"start {os.getpid()} {started}\n")

    def on_ready(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        ready_file.touch()

    signals.worker_ready.connect(on_ready, weak=False)
    spec = WorkerSpec(info=DeviceInfo(id=NOOP_DEVICE, platform=Platform.IOS), device_spec="")
    app.worker_main(argv=worker_argv(spec, loglevel="WARNING"))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["worker"]:
        return _worker(argv[1:])
    if argv[:1] == ["noop"] and len(argv) == 2:
        return _noop(Path(argv[1]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
