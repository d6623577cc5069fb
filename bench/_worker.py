"""Worker entry points for the fleet benchmarks (started by `bench/_fleet.py`).

    python -m bench._worker worker --device d1 ...   # `goalfleet worker`, plus bench/rules-<ms>
    python -m bench._worker noop READY_FILE          # a bare Celery worker with a no-op task
    python -m bench._worker noop READY_FILE DEVICE QUEUE   # the same, named for DEVICE, on QUEUE

`worker` is exactly `goalfleet worker` with one more decider spec, **bench/rules-<ms>**: the
offline rules decider after sleeping `<ms>` milliseconds, a model's think time without a model
(no model server competing for the benchmark's two cores). It is added by wrapping
`workers.fleet.runtime.default_decider_maker` before the worker starts; production code is unchanged
and no production worker knows the spec.

`noop` is the dispatch benchmark's baseline: a Celery worker made by the same
`workers.fleet.celery_app.make_celery(settings)` and started with the same flags
(`workers.fleet.worker.worker_argv`: prefork, one child, prefetch 1, no gossip/mingle, task events off),
serving only a no-op task on its own queue. The task's first act is to take
`time.monotonic_ns()` (`CLOCK_MONOTONIC`, like the sim device's `open` line) and append
`start <pid> <ns>` to `noop.starts` beside the ready file: when the task body started, for the
dispatch benchmark's one-way baseline (send → task body starts). The same worker also serves
**bench.bare** (`BARE_TASK`), the throughput benchmark's baseline: results ignored (as the
fleet's run task ignores them), and its one act is to append `done <time.time()>` to
`noop.done` beside the ready file, for the benchmark to count. Given DEVICE and QUEUE, the
worker is named for DEVICE (`w@DEVICE`) and consumes QUEUE: several bare workers share one
queue, as Celery's own workers would. **bench.trips** (`TRIPS_TASK`) is the bare task plus
`n` store round trips before its stamp: `n` script calls (`EVALSHA`) through the worker's own
store client, each writing a `payload` into a hash, as the run task's claim, step writes and
finish do; what a run's store round trips cost, with no loop around them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workers.core.model import DecideState, Decision
from workers.core.ports import Decider
from workers.decide.rules import RulesDecider
from workers.fleet import runtime

BENCH_SPEC = "bench/rules-"
NOOP_DEVICE = "bench-noop"
NOOP_TASK = "bench.noop"
BARE_TASK = "bench.bare"
TRIPS_TASK = "bench.trips"
_TRIP = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) redis.call('EXPIRE', KEYS[1], 60) return 1"
"""The round trip `TRIPS_TASK` makes: one script call (`EVALSHA`) writing one hash field, the
shape of the run task's claim, step writes and finish."""
PROFILE_ENV = "GOALFLEET_BENCH_PROFILE_DIR"
"""Set (a directory) for `worker`: its pool child profiles its runs there (`_profile_tasks`)."""
MAIN_PROFILE_ENV = "GOALFLEET_BENCH_MAIN_PROFILE_DIR"
"""Set (a directory) for `worker` and `noop`: the main process's main thread (Celery's consumer
loop) profiles itself there from ready to shutdown (`_profile_main`)."""


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
    if os.environ.get(PROFILE_ENV):
        _profile_tasks(Path(os.environ[PROFILE_ENV]))
    if os.environ.get(MAIN_PROFILE_ENV):
        _profile_main(Path(os.environ[MAIN_PROFILE_ENV]), "fleet")
    from scheduler.cli.main import main  # noqa: PLC0415 - after the decider maker is wrapped

    return main(["worker", *argv])


def _profile_between(start: Any, stop: Any, timer: Any, path: Callable[[], Path]) -> None:  # noqa: ANN401 - Celery signals, a clock
    """cProfile with `timer` from each Celery signal `start` to the next `stop`, the stats
    (all of them so far) written to `path()` at each `stop`, outside the profiled time."""
    import cProfile  # noqa: PLC0415 - only a profiled benchmark worker

    profiler = cProfile.Profile(timer)

    def begin(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        profiler.enable()

    def end(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        profiler.disable()
        profiler.dump_stats(path())

    start.connect(begin, weak=False)
    stop.connect(end, weak=False)


def _profile_tasks(directory: Path) -> None:
    """Each pool child over its whole runs (CPU time, not the waits on Redis), from Celery's
    `task_prerun` to its `task_postrun` (the run task's body, claim to finish), written to
    `<directory>/<pid>.prof` after every run."""
    from celery import signals  # noqa: PLC0415

    _profile_between(signals.task_prerun, signals.task_postrun, time.process_time,
                     lambda: directory / f"{os.getpid()}.prof")  # fmt: skip


def _profile_main(directory: Path, prefix: str) -> None:
    """The main thread of this worker's main process (`time.thread_time`: its own CPU, not
    the heartbeat thread's), from Celery's `worker_ready` to its `worker_shutdown`, written
    to `<directory>/<prefix>-<pid>.prof`."""
    from celery import signals  # noqa: PLC0415

    _profile_between(signals.worker_ready, signals.worker_shutdown, time.thread_time,
                     lambda: directory / f"{prefix}-{os.getpid()}.prof")  # fmt: skip


def noop_done(directory: Path) -> Path:
    """The file the bare task appends `done <time.time()>` to."""
    return directory / "noop.done"


def _noop(ready_file: Path, device: str = NOOP_DEVICE, queue: str = "") -> int:
    from celery import signals  # noqa: PLC0415 - Celery loads only in this process

    from workers.core.model import Platform  # noqa: PLC0415
    from workers.core.records import DeviceInfo  # noqa: PLC0415
    from workers.fleet.celery_app import make_celery  # noqa: PLC0415
    from workers.fleet.connections import store_client  # noqa: PLC0415
    from workers.fleet.runtime import WorkerSpec  # noqa: PLC0415
    from workers.fleet.state.scripts import Registered  # noqa: PLC0415
    from workers.fleet.worker import worker_argv  # noqa: PLC0415
    from workers.settings import Settings  # noqa: PLC0415

    if os.environ.get(MAIN_PROFILE_ENV):
        _profile_main(Path(os.environ[MAIN_PROFILE_ENV]), "bare")
    app = make_celery(Settings())
    starts = noop_starts(ready_file.parent)
    done = noop_done(ready_file.parent)

    @app.task(name=NOOP_TASK, ignore_result=False)  # type: ignore[untyped-decorator]
    def noop() -> None:
        started = time.monotonic_ns()  # first: the one-way hop ends here
        with starts.open("a") as f:
            f.write(f"start {os.getpid()} {started}\n")

    @app.task(name=BARE_TASK, ignore_result=True)  # type: ignore[untyped-decorator]
    def bare() -> None:
        with done.open("a") as f:  # one short line, O_APPEND: whole among the workers' lines
            f.write(f"done {time.time()!r}\n")

    trip: list[Registered] = []  # made in the pool child, at its first task

    @app.task(name=TRIPS_TASK, ignore_result=True)  # type: ignore[untyped-decorator]
    def trips(n: int, payload: str) -> None:
        if not trip:
            settings = Settings()
            trip.append(Registered(_TRIP, store_client(settings, outage_wait_s=1.0)))
        for i in range(n):
            trip[0](keys=[f"bench:trip:{os.getpid()}"], args=[i, payload])
        with done.open("a") as f:
            f.write(f"done {time.time()!r}\n")

    def on_ready(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        ready_file.touch()

    signals.worker_ready.connect(on_ready, weak=False)
    spec = WorkerSpec(info=DeviceInfo(id=device, platform=Platform.IOS), device_spec="")
    argv = worker_argv(spec, loglevel="WARNING")
    if queue:
        argv[argv.index("--queues") + 1] = queue
    app.worker_main(argv=argv)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["worker"]:
        return _worker(argv[1:])
    if argv[:1] == ["noop"] and len(argv) == 2:  # noop READY_FILE
        return _noop(Path(argv[1]))
    if argv[:1] == ["noop"] and len(argv) == 4:  # noop READY_FILE DEVICE QUEUE
        return _noop(Path(argv[1]), argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
