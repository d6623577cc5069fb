"""Starting one device's worker: the worker-side composition root.

`start_worker` wires the runtime (built in each pool child at `worker_process_init`), the
device's presence (registered when the worker is ready, deregistered at shutdown) and runs a
Celery worker named `w@<device>` consuming only `device.<device>`.

A worker that loses its device lease stands down: the presence closes the fence (the run in
flight aborts before its next device action and goes back to pending), the worker stops
consuming at once (Celery's warm shutdown, SIGTERM to itself; a cold one if the run has not
let go within `lease_s` + `model_timeout_s`), and `start_worker` raises `LeaseLostError`, which
`goalfleet worker` reports as one line and exit status 3, for its supervisor to see.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from celery import signals
from celery.exceptions import TimeLimitExceeded, WorkerLostError

from workers.core.ports import DevicePort
from workers.core.secrets import EnvSecrets
from workers.fleet import runtime as runtime_mod
from workers.fleet.celery_app import make_celery
from workers.fleet.connections import store_client
from workers.fleet.delivery import send_again, send_run
from workers.fleet.fence import LeaseLostError
from workers.fleet.keys import RUN_TASK, Keys, device_queue
from workers.fleet.presence import Presence
from workers.fleet.runtime import WorkerSpec, build_runtime, default_device_host
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.tasks import register_tasks
from workers.settings import Settings
from workers.telemetry.logs import LogFormat
from workers.telemetry.observers import RunObserver
from workers.telemetry.setup import setup_worker_telemetry

log = structlog.stdlib.get_logger("goalfleet.worker")


def worker_argv(spec: WorkerSpec, *, loglevel: str = "INFO") -> list[str]:
    return [
        "--quiet",  # no banner: `goalfleet worker` prints its own start line
        "worker",
        "--hostname",
        spec.name,
        "--queues",
        device_queue(spec.info.id),
        "--pool",
        "prefork",
        "--concurrency",
        "1",
        "--prefetch-multiplier",
        "1",
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        loglevel,
    ]


def start_worker(
    settings: Settings,
    spec: WorkerSpec,
    environ: Mapping[str, str],
    *,
    observers: tuple[RunObserver, ...] = (),
    loglevel: str = "INFO",
    log_format: LogFormat = "auto",
    metrics_host: str = "127.0.0.1",
    metrics_port: int | None = None,
) -> None:
    """Run the worker until it is stopped (SIGTERM/SIGINT: warm shutdown); `LeaseLostError`
    when it stood down because it lost its device's lease.

    Logs and metrics are set up here, in the main process before the pool forks
    (`workers.telemetry.setup`); `metrics_port` serves this worker's one `/metrics` endpoint."""
    telemetry = setup_worker_telemetry(
        spec.info,
        spec.name,
        environ,
        log_level=loglevel,
        log_format=log_format,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
    )
    secrets = telemetry.wrap_secrets(EnvSecrets(environ))
    host = default_device_host(spec)  # each pool child keeps its copy's daemon and app
    opener = telemetry.wrap_opener(host.open)
    all_observers = (*telemetry.observers, *observers)
    registry = DeviceRegistry(store_client(settings), Keys(settings.key_prefix))
    presence = Presence(registry, spec, settings, probe=_probe(spec), on_lost=_stand_down(settings))
    fence = presence.fence
    runtime_mod.configure(
        lambda: build_runtime(
            settings,
            spec,
            secrets,
            observers=all_observers,
            open_device=opener,
            fence=fence,
            host=host,
        )
    )
    presence.register()
    from workers.devices.factory import release_device  # noqa: PLC0415 - only workers open devices

    release_device(spec.device_spec)  # a daemon a dead owner left in its state dir
    presence.start()

    def on_process_init(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        runtime_mod.init_process()

    def on_process_shutdown(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        runtime_mod.reset()

    def on_ready(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        log.info(
            "worker_ready",
            worker=spec.name,
            device_id=spec.info.id,
            queue=device_queue(spec.info.id),
        )

    def on_shutdown(**_: Any) -> None:  # noqa: ANN401 - Celery signal kwargs
        presence.stop()

    app = make_celery(settings)
    register_tasks(app)
    main_pid = os.getpid()

    def on_task_failure(
        sender: Any = None,  # noqa: ANN401 - Celery signal kwargs
        exception: BaseException | None = None,
        args: Any = None,  # noqa: ANN401 - Celery signal kwargs
        **_: Any,  # noqa: ANN401 - Celery signal kwargs
    ) -> None:
        """The pool child running a run died or was killed at the hard time limit (Celery
        tells the main process; the message was acknowledged on receipt): this worker still
        holds the lease, so it sends the run to its device again, off Celery's loop."""
        if os.getpid() != main_pid or getattr(sender, "name", None) != RUN_TASK:
            return
        if not isinstance(exception, WorkerLostError | TimeLimitExceeded) or not args:
            return
        run_id = str(args[0])
        log.warning("run_child_lost", run_id=run_id, error=type(exception).__name__)
        threading.Thread(
            target=send_again,
            args=(functools.partial(send_run, app), run_id, spec.info.id),
            kwargs={"give_up": lambda: fence.lost or presence.standing_down},
            name="goalfleet-send-again",
            daemon=True,
        ).start()

    signals.task_failure.connect(on_task_failure, weak=False)
    signals.worker_process_init.connect(on_process_init, weak=False)
    signals.worker_process_shutdown.connect(on_process_shutdown, weak=False)
    signals.worker_ready.connect(on_ready, weak=False)
    signals.worker_shutdown.connect(on_shutdown, weak=False)
    try:
        app.worker_main(argv=worker_argv(spec, loglevel=loglevel))
    finally:
        presence.stop()
        release_device(spec.device_spec)  # its pool children's daemons, its probe's
        telemetry.stop()
    if presence.standing_down:
        raise LeaseLostError(
            f"worker {spec.name} stood down: {presence.lost_reason}",
            taken=fence.taken,
            hint="its run went back to pending; start it again once the device is free",
        )


def _stand_down(settings: Settings) -> Callable[[str], None]:
    """What the presence calls (from the heartbeat thread) when the lease is lost: stop
    consuming at once (a warm shutdown: SIGTERM to this process, which Celery handles in its
    main thread); if the run in flight has not let go after a grace period (a hung device
    action, a slow model call), a cold shutdown (SIGQUIT) ends it."""
    grace_s = settings.lease_s + settings.model_timeout_s

    def stand_down(_why: str) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        cold = threading.Timer(grace_s, os.kill, args=(os.getpid(), signal.SIGQUIT))
        cold.daemon = True
        cold.start()

    return stand_down


def _probe(spec: WorkerSpec) -> Callable[[], DevicePort]:
    """The quarantine probe's device: a daemon of its own (the pool child keeps the run's),
    the app relaunched by the device's reset policy before it is judged."""
    from workers.devices.factory import open_probe_device  # noqa: PLC0415 - only workers do

    return lambda: open_probe_device(spec.device_spec, sim=spec.sim, app=spec.app)
