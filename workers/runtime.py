"""The per-process worker runtime: built once in each pool child (`worker_process_init`) into
a typed object, from the `WorkerSpec` the worker's composition root configured before the
pool forked.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from workers.connections import redis_client
from workers.devices.sim import NO_FAULTS, Faults
from workers.errors import ConfigError
from workers.keys import Keys, worker_name
from workers.observers import RunObserver
from workers.ports import Decider, DevicePort
from workers.records import DeviceInfo
from workers.runstore import RunStore
from workers.secrets import SecretResolver
from workers.settings import Settings

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
    latency_scale: float = 0.0
    session_log: Path | None = None
    """Sim devices append open/close lines here (overlap checks in tests)."""
    faults: Faults = NO_FAULTS
    """Sim devices: deterministic fault injection (chaos and quarantine tests)."""

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

    @property
    def device_id(self) -> str:
        return self.spec.info.id


def default_device_opener(spec: WorkerSpec) -> DeviceOpener:
    from workers.devices.factory import make_device  # noqa: PLC0415 - only workers open devices
    from workers.devices.sim import make_sim_device  # noqa: PLC0415 - same reason

    def open_device(run_id: str) -> DevicePort:
        seed = zlib.crc32(run_id.encode())
        if spec.device_spec.startswith("sim:"):
            try:
                return make_sim_device(
                    spec.device_spec,
                    latency_scale=spec.latency_scale,
                    seed=seed,
                    session_log=spec.session_log,
                    faults=spec.faults,
                )
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return make_device(spec.device_spec, latency_scale=spec.latency_scale, seed=seed)

    return open_device


def default_decider_maker(settings: Settings | None = None) -> DeciderMaker:
    from workers.decide.factory import ModelSettings, make_decider  # noqa: PLC0415 - lazy SDKs

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
) -> WorkerRuntime:
    client = redis_client(settings.redis_url)
    return WorkerRuntime(
        settings=settings,
        spec=spec,
        redis=client,
        store=RunStore(client, Keys(settings.key_prefix)),
        open_device=open_device or default_device_opener(spec),
        make_decider=make_decider or default_decider_maker(settings),
        secrets=secrets,
        observers=observers,
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
    """Drop the runtime (`worker_process_shutdown`, tests)."""
    if _Holder.runtime is not None:
        _Holder.runtime.redis.close()
    _Holder.runtime = None
