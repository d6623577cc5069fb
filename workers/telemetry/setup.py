"""Wiring logs and metrics into a worker: what the worker's composition root calls once.

    telemetry = setup_worker_telemetry(spec, environ, log_level="INFO", metrics_port=9101)
    secrets = telemetry.wrap_secrets(EnvSecrets(environ))
    build_runtime(..., secrets, observers=telemetry.observers,
                  open_device=telemetry.wrap_opener(default_device_opener(spec)))
    ...
    telemetry.stop()

Runs in the worker's main process before the pool forks: configures logging (and Celery's
hooks), wipes the multiprocess directory, starts the one `/metrics` endpoint, and returns the
observers and device wrappers the pool child uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from workers.core.device_hooks import with_hooks
from workers.core.ports import DevicePort
from workers.core.records import DeviceInfo
from workers.core.secrets import SECRET_ENV_PREFIX, SecretResolver
from workers.telemetry import logs, metrics
from workers.telemetry.log_observer import DeviceLog, LogObserver
from workers.telemetry.metrics_observer import DeviceMetrics, MetricsObserver
from workers.telemetry.observers import RunObserver


@dataclass
class WorkerTelemetry:
    info: DeviceInfo
    observers: tuple[RunObserver, ...]
    server: metrics.MetricsServer | None = None
    secret_values: logs.SecretValues = field(default_factory=lambda: logs.SECRETS)

    def wrap_device(self, device: DevicePort) -> DevicePort:
        return with_hooks(device, DeviceMetrics(device.platform), DeviceLog())

    def wrap_opener(self, opener: Callable[[str], DevicePort]) -> Callable[[str], DevicePort]:
        return lambda run_id: self.wrap_device(opener(run_id))

    def wrap_secrets(self, resolver: SecretResolver) -> SecretResolver:
        return logs.RedactingSecrets(resolver, self.secret_values)

    @property
    def metrics_url(self) -> str | None:
        return self.server.url if self.server is not None else None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def setup_worker_telemetry(
    info: DeviceInfo,
    worker: str,
    environ: Mapping[str, str],
    *,
    log_level: str = "INFO",
    log_format: logs.LogFormat = "auto",
    metrics_host: str = "127.0.0.1",
    metrics_port: int | None = None,
) -> WorkerTelemetry:
    """Configure this worker's logs and metrics; start its `/metrics` endpoint if a port is
    given (0: any free port). `environ` is the process environment, passed by the caller."""
    logs.configure_logging(level=log_level, fmt=log_format)
    logs.install_celery_hooks()
    # the worker's own secrets are redacted from the start, before any run resolves them
    logs.SECRETS.add(v for k, v in environ.items() if k.startswith(SECRET_ENV_PREFIX))
    log = logs.get_logger("goalfleet.worker")

    path = metrics.multiproc_dir(environ)
    if path is not None and metrics.multiprocess_active():
        metrics.wipe_multiproc_dir(path)
        metrics.install_celery_hooks(path)
    elif path is not None:
        log.warning(
            "metrics.multiprocess_inactive",
            hint=f"{metrics.MULTIPROC_ENV} was set after prometheus-client was imported; "
            "pool-child metrics will not be exported",
        )
        path = None
    elif metrics_port is not None:
        log.warning(
            "metrics.single_process",
            hint=f"set {metrics.MULTIPROC_ENV} before starting the worker, or metrics recorded "
            "in the pool child are not exported",
        )
    m = metrics.worker_metrics()
    m.worker_info.labels(info.id, info.platform.value, info.backend, worker).set(1)
    server = None
    if metrics_port is not None:
        server = metrics.MetricsServer(path, host=metrics_host, port=metrics_port).start()
        log.info("metrics.serving", url=server.url, multiprocess_dir=str(path) if path else None)
    metrics_observer = MetricsObserver(info.platform, m)
    metrics_observer.prime()
    return WorkerTelemetry(
        info=info,
        observers=(LogObserver(), metrics_observer),
        server=server,
    )
