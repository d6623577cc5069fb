"""Device specs → device ports. The one place a spec string becomes a device: each function asks
the backend of the spec's scheme (`workers.devices.backend`).

- `sim:<app>-<ios|android>`: an in-process `SimDevice` (apps: see `sim.apps.APPS`)
- `agent-device:linux`, `ios:<udid>`, `android:<serial>`: the agent-device daemon
"""

from __future__ import annotations

from workers.core.app import AppConfig
from workers.core.model import Platform
from workers.core.ports import DeviceHost, DevicePort
from workers.devices.backend import BACKENDS, backend_for, backend_named
from workers.devices.sim.options import DEFAULT_SIM, SimOptions


def backend_names() -> list[str]:
    """What `goalfleet worker --backend` may name."""
    return [b.name for b in BACKENDS]


def worker_device_spec(
    backend: str, platform: Platform, device_id: str, *, app: str, target: str
) -> str:
    """The device spec of a worker started with `--backend backend` (its `--platform`,
    `--device`, the sim's `--app`, agent-device's `--target`)."""
    return backend_named(backend).worker_spec(platform, device_id, app=app, target=target)


def check_device_spec(spec: str) -> str:
    """Validate a device spec without touching a device; raise ConfigError naming the fix."""
    backend_for(spec)
    return spec


def make_device(spec: str, *, seed: int = 0, sim: SimOptions = DEFAULT_SIM) -> DevicePort:
    """Open the device `spec` names. `sim` applies to `sim:` specs only; `seed` makes a sim
    device's random faults and jitter repeatable."""
    return backend_for(spec).open_device(spec, seed=seed, sim=sim, role="")


def make_device_host(
    spec: str, *, sim: SimOptions = DEFAULT_SIM, app: AppConfig | None = None
) -> DeviceHost:
    """The `DeviceHost` a worker keeps for `spec` across its runs: a `SimHost`, or an
    `AgentDeviceHost` (its daemon kept, its app reset per run). Opens nothing yet."""
    return backend_for(spec).make_host(spec, sim=sim, app=app)


def open_probe_device(
    spec: str, *, sim: SimOptions = DEFAULT_SIM, app: AppConfig | None = None
) -> DevicePort:
    """A device for the quarantine probe, beside the run's: its own daemon (a state dir of its
    own, `+probe`), started for the probe and stopped on close, the device's reset applied
    first (on the Linux target, `app`'s command relaunched); a sim device with the worker's
    own sim options (its faults too: a broken sim stays broken to its probe)."""
    return backend_for(spec).open_probe(spec, sim=sim, app=app)


def release_device(spec: str) -> bool:
    """Stop what a device spec's process left running on this host when its owner is gone or
    is this process: the agent-device daemon of its state dir (a worker calls this before its
    first run and at stop, for the daemons of its pool children). True if one was stopped;
    sim devices hold nothing."""
    return backend_for(spec).release(spec)
