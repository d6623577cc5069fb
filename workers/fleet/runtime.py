"""The per-process worker runtime: built once in each pool child (`worker_process_init`) into
a typed object, from the `WorkerSpec` the worker's composition root configured before the
pool forked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from workers.core.app import AppConfig
from workers.core.errors import ConfigError
from workers.core.ports import Decider, DeviceHost, DevicePort
from workers.core.records import DeviceInfo
from workers.core.secrets import SecretResolver
from workers.core.shots import Camera
from workers.core.video import Videographer
from workers.devices.sim.device import DEFAULT_SIM, SimOptions
from workers.fleet.artifacts import make_camera, make_videographer
from workers.fleet.connections import store_client
from workers.fleet.fence import Fence
from workers.fleet.keys import Keys, worker_name
from workers.fleet.state.runs import RunStore
from workers.settings import Settings
from workers.telemetry.observers import RunObserver

DeviceOpener = Callable[[str], DevicePort]
"""run id → an open device (seeded per run); the task closes it in `finally`."""
DeciderMaker = Callable[[str], Decider]
"""the request's `decider` spec → a Decider; raises `ConfigError` for an unknown spec."""


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker serves: its device, and how to open it."""

    info: DeviceInfo
    device_spec: str
    """What `workers.devices.factory.make_device` takes: `sim:signin-ios`, `ios:<udid>`, ..."""
    sim: SimOptions = DEFAULT_SIM
    """Options for a `sim:` device (latency, session log, fault injection); others ignore it."""
    app: AppConfig | None = None
    """The app its device serves (`--app-id`, `--app-command`, …) and its default reset."""

    @property
    def name(self) -> str:
        return worker_name(self.info.id)


@dataclass
class WorkerRuntime:
    settings: Settings
    spec: WorkerSpec
    redis: redis.Redis
    store: RunStore
    open_device: DeviceOpener
    make_decider: DeciderMaker
    secrets: SecretResolver
    observers: tuple[RunObserver, ...] = field(default=())
    camera: Camera | None = None
    """Step pictures (`workers.fleet.artifacts.make_camera`); None: the runs take none."""
    video: Videographer | None = None
    """Run videos (`workers.fleet.artifacts.make_videographer`); None: the runs keep none."""
    fence: Fence | None = None
    """The worker's device lease as the run task sees it (made by `start_worker` before the
    pool forks): checked before every device action and by every claim, step write and
    finish. None only where the task body runs without a worker holding a lease (tests)."""
    host: DeviceHost | None = None
    """The device kept across runs (its daemon, its app): each run's app and reset are
    prepared on it before `open_device`; closed with the runtime. None: `open_device` alone
    (tests), and a run's app is not checked or reset."""

    @property
    def device_id(self) -> str:
        return self.spec.info.id


def default_device_host(spec: WorkerSpec) -> DeviceHost:
    """The worker's device host (nothing opened yet: each pool child starts its own daemon on
    its first run, after the fork)."""
    from workers.devices.factory import make_device_host  # noqa: PLC0415 - only workers do

    return make_device_host(spec.device_spec, sim=spec.sim, app=spec.app)


def default_device_opener(spec: WorkerSpec) -> DeviceOpener:
    """A device per run on a host of its own (tests and tools that need no host)."""
    return default_device_host(spec).open


def default_decider_maker(settings: Settings | None = None) -> DeciderMaker:
    from workers.decide.factory import make_decider  # noqa: PLC0415 - lazy SDKs
    from workers.decide.options import ModelSettings  # noqa: PLC0415

    model = settings.model_settings() if settings is not None else ModelSettings()

    def make(spec: str) -> Decider:
        return make_decider(spec, model)

    return make


def build_runtime(
    settings: Settings,
    spec: WorkerSpec,
    secrets: SecretResolver,
    *,
    observers: tuple[RunObserver, ...] = (),
    open_device: DeviceOpener | None = None,
    make_decider: DeciderMaker | None = None,
    fence: Fence | None = None,
    host: DeviceHost | None = None,
) -> WorkerRuntime:
    # A run waits a Redis outage out (backoff with jitter) as long as it may run at all.
    client = store_client(settings, outage_wait_s=settings.soft_time_limit_s)
    return WorkerRuntime(
        settings=settings,
        spec=spec,
        redis=client,
        store=RunStore(client, Keys(settings.key_prefix)),
        open_device=open_device or default_device_opener(spec),
        make_decider=make_decider or default_decider_maker(settings),
        secrets=secrets,
        observers=observers,
        fence=fence,
        camera=make_camera(settings),
        video=make_videographer(settings),
        host=host,
    )


class _Holder:
    """The one process-wide slot: the configuration (set before the fork) and the runtime
    (built after it, in each pool child)."""

    factory: Callable[[], WorkerRuntime] | None = None
    runtime: WorkerRuntime | None = None


def configure(factory: Callable[[], WorkerRuntime]) -> None:
    """Called by the worker's composition root before the pool forks."""
    _Holder.factory = factory
    _Holder.runtime = None


def init_process() -> WorkerRuntime:
    """Build this process's runtime (`worker_process_init`)."""
    if _Holder.factory is None:
        raise ConfigError("the worker runtime was not configured; start workers with goalfleet")
    _Holder.runtime = _Holder.factory()
    return _Holder.runtime


def current() -> WorkerRuntime:
    if _Holder.runtime is None:
        return init_process()
    return _Holder.runtime


def reset() -> None:
    """Drop the runtime (`worker_process_shutdown`, tests): its device host stops what it
    kept (the daemon, the app)."""
    rt, _Holder.runtime = _Holder.runtime, None
    if rt is not None:
        try:
            if rt.host is not None:
                rt.host.close()
        finally:
            rt.redis.close()
