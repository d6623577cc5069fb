"""Prometheus metrics of a worker, and how they leave a prefork worker correctly.

Runs execute in Celery's pool child, which the worker replaces now and then (max tasks per
child, a crash, a hard time limit). A child cannot serve its own metrics (an endpoint in the
child dies with it and undercounts) and a pushgateway turns counters into last-write-wins, so
the worker uses prometheus-client's multiprocess mode:

1. `PROMETHEUS_MULTIPROC_DIR` is set *before Python starts* (prometheus-client picks its value
   class at import). `goalfleet worker` re-executes itself with a per-device directory when it
   is missing (`ensure_multiproc_env`); a container sets it in its environment.
2. The worker's main process wipes that directory at start (`wipe_multiproc_dir`), before any
   metric is touched: files left by an earlier worker would otherwise be summed in.
3. Every process writes its samples to its own mmap'ed files there; counters and histograms
   of a dead child stay in their files, so totals survive a child's restart.
4. A pool child's live gauges are dropped when it exits (`mark_process_dead` on Celery's
   `worker_process_shutdown`), and at every scrape for children that died without saying so
   (SIGKILL): `reap_dead_processes`.
5. One HTTP endpoint per worker, in the main process (`MetricsServer`: prometheus-client's
   `start_http_server`), serves the sum over all files with `MultiProcessCollector`.

Names follow Prometheus conventions (base units, `_seconds`, `_total`). Nothing is labelled
by run id or task id: those are unbounded and belong in logs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar, get_type_hints
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Metric,
    generate_latest,
    start_http_server,
    values,
)
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from workers.processes import pid_alive

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
NAMESPACE = "goalfleet"

PHASE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
"""Step phases: a sim snapshot is ~10 ms, a model decision ~1 s, a slow device ~tens of s."""
RUN_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
QUEUE_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
COMMAND_BUCKETS = PHASE_BUCKETS

_LIVE_FILE = re.compile(r"^gauge_live[a-z]+_(\d+)\.db$")
_M = TypeVar("_M")


Made = Counter | Gauge | Histogram
_Made = TypeVar("_Made", Counter, Gauge, Histogram)


@dataclass(frozen=True)
class Spec:
    """A metric, declared once as a field of a metrics class: `name: Annotated[Counter,
    Spec(doc, labels)]`; `make_metrics` makes it, named `goalfleet_<prefix><name>`."""

    doc: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] | None = None
    """A histogram's buckets."""
    mode: Literal["livesum", "livemax"] | None = None
    """A gauge's multiprocess mode."""

    def make(self, kind: type[Made], name: str, registry: CollectorRegistry) -> Made:
        options: dict[str, Any] = {}
        if self.buckets is not None:
            options["buckets"] = self.buckets
        if self.mode is not None:
            options["multiprocess_mode"] = self.mode
        return kind(name, self.doc, self.labels, namespace=NAMESPACE, registry=registry, **options)


@functools.cache
def labelled(metric: _Made, *values: str) -> _Made:
    """`metric.labels(*values)`, looked up once per label set: prometheus-client checks the
    labels and takes a lock on every `labels` call, and a worker records ~50 series a run.
    (A series is never removed here, so the child stays the one the registry exports.)"""
    return metric.labels(*values)


def make_metrics(cls: type[_M], registry: CollectorRegistry, *, prefix: str = "") -> _M:
    """`cls` (a dataclass of metrics) with every `Spec` field's metric made in `registry`."""
    made = {
        name: spec.make(hint.__origin__, prefix + name, registry)
        for name, hint in get_type_hints(cls, include_extras=True).items()
        for spec in getattr(hint, "__metadata__", ())
        if isinstance(spec, Spec)
    }
    return cls(**made)


@dataclass(frozen=True)
class WorkerMetrics:
    """Every metric a worker records, each named `goalfleet_<field>`. Create once per process
    (`worker_metrics()`)."""

    step_phase_seconds: Annotated[
        Histogram,
        Spec(
            "Time spent in one phase of a step (snapshot, decide, action).",
            ("phase", "platform", "outcome"),
            buckets=PHASE_BUCKETS,
        ),
    ]
    run_duration_seconds: Annotated[
        Histogram,
        Spec(
            "Wall time of a run on its device, from claim to result.",
            ("platform", "status"),
            buckets=RUN_BUCKETS,
        ),
    ]
    queue_wait_seconds: Annotated[
        Histogram,
        Spec(
            "Time from submit to the run starting on its device.",
            ("platform",),
            buckets=QUEUE_BUCKETS,
        ),
    ]
    runs: Annotated[
        Counter, Spec("Runs finished on this worker, by final status.", ("platform", "status"))
    ]
    steps: Annotated[Counter, Spec("Steps taken, by outcome.", ("platform", "outcome"))]
    decide_tokens: Annotated[
        Counter,
        Spec(
            "Model tokens used by decisions (direction: input or output).",
            ("platform", "direction"),
        ),
    ]
    decide_cost: Annotated[
        Counter,
        Spec(
            "What decisions cost by the operator's price table (GOALFLEET_PRICE_FILE), in its "
            "currency; every decider of a step's chain counts.",
            ("platform",),
        ),
    ]
    stale_ref_resnapshots: Annotated[
        Counter,
        Spec(
            "Steps whose pinned ref went stale, so the loop re-snapshotted and decided again.",
            ("platform",),
        ),
    ]
    run_redeliveries: Annotated[
        Counter,
        Spec(
            "Runs started again after a redelivery (attempt > 1: a worker died or timed "
            "out on them).",
            ("platform",),
        ),
    ]
    device_command_seconds: Annotated[
        Histogram,
        Spec(
            "Duration of one device command (snapshot, press, fill), retries apart.",
            ("platform", "command"),
            buckets=COMMAND_BUCKETS,
        ),
    ]
    device_transient_errors: Annotated[
        Counter,
        Spec(
            "Device commands that failed transiently; the loop retries them with backoff.",
            ("platform", "command"),
        ),
    ]
    worker_busy: Annotated[
        Gauge,
        Spec(
            "1 while this worker's device runs a run (live: a dead pool child drops out).",
            ("platform",),
            mode="livesum",
        ),
    ]
    worker_info: Annotated[
        Gauge,
        Spec(
            "1 per running worker, labelled with its device (join on instance).",
            ("device", "platform", "backend", "worker"),
            mode="livemax",
        ),
    ]
    decide_seconds: Annotated[
        Histogram,
        Spec(
            "Time to a decision, by who made it (memory, rules, model, scripted, human).",
            ("platform", "decided_by"),
            buckets=PHASE_BUCKETS,
        ),
    ]
    memory_events: Annotated[
        Counter,
        Spec(
            "Decision memory: hit, miss, invalidated (a remembered action moved nothing), "
            "write (a done run's new entry).",
            ("platform", "event"),
        ),
    ]
    escalations: Annotated[
        Counter,
        Spec(
            "Decisions that went up the chain (or to a person), by cause (low_confidence, "
            "invalid, guard) and by the decider that escalated.",
            ("platform", "cause", "decider"),
        ),
    ]
    questions: Annotated[
        Counter,
        Spec("Runs parked for a person after their last decider escalated.", ("platform",)),
    ]

    @classmethod
    def create(cls, registry: CollectorRegistry) -> WorkerMetrics:
        return make_metrics(cls, registry)


class _Holder:
    metrics: ClassVar[WorkerMetrics | None] = None
    registry: ClassVar[CollectorRegistry | None] = None


def worker_metrics() -> WorkerMetrics:
    """This process's metrics, created on first use (never at import)."""
    if _Holder.metrics is None:
        _Holder.registry = CollectorRegistry(auto_describe=True)
        _Holder.metrics = WorkerMetrics.create(_Holder.registry)
    return _Holder.metrics


def local_registry() -> CollectorRegistry:
    """The registry `worker_metrics()` registered into (single-process mode and tests)."""
    worker_metrics()
    if _Holder.registry is None:  # pragma: no cover - set by worker_metrics()
        raise RuntimeError("metrics registry missing")
    return _Holder.registry


# -- multiprocess mode -----------------------------------------------------------------------


def multiprocess_active() -> bool:
    """Whether prometheus-client picked its mmap'ed values (the env was set before import)."""
    return bool(getattr(values.ValueClass, "_multiprocess", False))


def multiproc_dir(environ: Mapping[str, str]) -> Path | None:
    raw = environ.get(MULTIPROC_ENV, "")
    return Path(raw) if raw else None


def default_multiproc_dir(device_id: str, port: int, tmp: Path) -> Path:
    """Where `goalfleet worker` keeps its metric files when none is configured: one directory
    per device and port (two live workers never share one; a restart reuses and wipes it)."""
    return tmp / f"goalfleet-metrics-{device_id}-{port or os.getpid()}"


def ensure_multiproc_env(
    environ: Mapping[str, str], default: Path, argv: Sequence[str]
) -> None:  # pragma: no cover - replaces the process
    """Re-execute this Python with `PROMETHEUS_MULTIPROC_DIR=default` unless it is set.

    The variable must be there before prometheus-client is imported, so setting it in
    `os.environ` now would be too late for any module that already imported it.
    """
    if multiproc_dir(environ) is not None:
        return
    default.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = {**environ, MULTIPROC_ENV: str(default)}
    os.execve(sys.executable, [sys.executable, *argv], env)  # noqa: S606 - our own interpreter


def wipe_multiproc_dir(path: Path) -> None:
    """Create `path` if needed and delete the metric files an earlier worker left there.

    Only the worker's main process calls this, at start, before any metric is recorded.
    """
    path.mkdir(parents=True, exist_ok=True)
    for f in path.glob("*.db"):
        with contextlib.suppress(FileNotFoundError):
            f.unlink()


def reap_dead_processes(path: Path) -> list[int]:
    """Drop the live gauges of processes that died without `worker_process_shutdown`."""
    dead: list[int] = []
    for f in path.glob("gauge_live*_*.db"):
        m = _LIVE_FILE.match(f.name)
        if m is None:
            continue
        pid = int(m.group(1))
        if pid != os.getpid() and not pid_alive(pid):
            mark_process_dead(pid, str(path))  # type: ignore[no-untyped-call]  # untyped upstream
            dead.append(pid)
    return dead


class _ReapingCollector(Collector):
    """prometheus-client's `MultiProcessCollector`, reaping dead processes' live gauges first
    (`reap_dead_processes`) so a SIGKILLed child's busy gauge is gone from this very scrape."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._files = MultiProcessCollector(None, path=str(path))  # type: ignore[no-untyped-call]  # untyped upstream

    def collect(self) -> Iterable[Metric]:
        reap_dead_processes(self._path)
        metrics: Iterable[Metric] = self._files.collect()  # type: ignore[no-untyped-call]  # untyped upstream
        return metrics


def multiprocess_registry(path: Path) -> CollectorRegistry:
    """A registry that reads every process's files in `path` at each collect."""
    registry = CollectorRegistry()
    registry.register(_ReapingCollector(path))
    return registry


def render(path: Path | None) -> bytes:
    """The exposition text: all processes' files in multiprocess mode, else this process."""
    registry = local_registry() if path is None else multiprocess_registry(path)
    return generate_latest(registry)


class MetricsServer:
    """One `/metrics` endpoint for a whole prefork worker, served from its main process.

    prometheus-client's own `start_http_server` on `host:port` (port 0: any free port; `port`
    and `url` give the one bound once started), over `multiprocess_registry(path)` (every
    process's files, read at each scrape) or, without a multiprocess directory, this process's
    registry. Like any prometheus-client endpoint it answers every path with the metrics.
    """

    def __init__(self, path: Path | None, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.path = path
        self.registry = local_registry() if path is None else multiprocess_registry(path)
        self._bind = (host, port)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return self._bind[0]

    @property
    def port(self) -> int:
        """The bound port once started (the one picked for port 0), else the one asked for."""
        return self._bind[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def start(self) -> MetricsServer:
        if self._server is None:
            host, port = self._bind
            self._server, self._thread = start_http_server(port, host, self.registry)
            self._bind = (str(self._server.server_address[0]), int(self._server.server_port))
        return self

    def stop(self) -> None:
        """Stop serving and release the port; idempotent."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)


def install_celery_hooks(path: Path) -> None:
    """`mark_process_dead` when a pool child exits cleanly (`worker_process_shutdown`)."""
    from celery import signals  # noqa: PLC0415 - only processes that run Celery load it

    def on_process_shutdown(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        if multiprocess_active():
            mark_process_dead(os.getpid(), str(path))  # type: ignore[no-untyped-call]  # untyped upstream

    signals.worker_process_shutdown.connect(on_process_shutdown, weak=False)
