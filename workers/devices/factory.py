"""Device specs → device ports. The one place a spec string becomes a device.

- `sim:<app>-<ios|android>`: an in-process `SimDevice` (apps: see `sim_apps.APPS`)
- `agent-device:linux`, `ios:<udid>`, `android:<serial>`: the agent-device daemon
"""

from __future__ import annotations

import re

from workers.core.app import AppConfig
from workers.core.errors import ConfigError
from workers.core.ports import DeviceHost, DevicePort
from workers.devices.sim import DEFAULT_SIM, SimOptions, make_sim_device
from workers.devices.sim import SPEC as SIM_SPEC
from workers.devices.sim_apps import APPS

AGENT_DEVICE_SPEC = re.compile(
    r"^(?:agent-device:linux|ios:[A-Za-z0-9-]+|android:[A-Za-z0-9.:_-]+)$"
)


def check_device_spec(spec: str) -> str:
    """Validate a device spec without touching a device; raise ConfigError naming the fix."""
    m = SIM_SPEC.fullmatch(spec)
    if m is not None:
        if m.group("app") not in APPS:
            known = ", ".join(f"sim:{a}-ios" for a in sorted(APPS))
            raise ConfigError(f"unknown sim app in --device {spec!r}; known: {known} (or -android)")
        return spec
    if AGENT_DEVICE_SPEC.fullmatch(spec):
        return spec
    raise ConfigError(
        f"--device {spec!r} is not a device spec; use sim:<app>-<ios|android> "
        "(e.g. sim:signin-ios), agent-device:linux, ios:<udid> or android:<serial>"
    )


def make_device(spec: str, *, seed: int = 0, sim: SimOptions = DEFAULT_SIM) -> DevicePort:
    """Open the device `spec` names. `sim` applies to `sim:` specs only; `seed` makes a sim
    device's random faults and jitter repeatable."""
    check_device_spec(spec)
    if spec.startswith("sim:"):
        return make_sim_device(
            spec,
            latency_scale=sim.latency_scale,
            seed=seed,
            faults=sim.faults,
            session_log=sim.session_log,
        )
    from workers.devices.agent_device_host import open_device  # noqa: PLC0415 - Node tooling is optional

    return open_device(spec)


def make_device_host(
    spec: str, *, sim: SimOptions = DEFAULT_SIM, app: AppConfig | None = None
) -> DeviceHost:
    """The `DeviceHost` a worker keeps for `spec` across its runs: a `SimHost`, or an
    `AgentDeviceHost` (its daemon kept, its app reset per run). Opens nothing yet."""
    check_device_spec(spec)
    if spec.startswith("sim:"):
        from workers.devices.sim_host import SimHost  # noqa: PLC0415 - one per backend

        return SimHost(spec, sim=sim, app=app)
    from workers.devices.agent_device_host import AgentDeviceHost  # noqa: PLC0415 - Node tooling

    return AgentDeviceHost(spec, app=app)


def open_probe_device(
    spec: str, *, sim: SimOptions = DEFAULT_SIM, app: AppConfig | None = None
) -> DevicePort:
    """A device for the quarantine probe, beside the run's: its own daemon (a state dir of its
    own, `+probe`), started for the probe and stopped on close, the device's reset policy
    applied first (on the Linux target, `app`'s command relaunched: `open_probe`); a sim device
    with the worker's own sim options (its faults too: a broken sim stays broken to its
    probe)."""
    if spec.startswith("sim:"):
        return make_device(spec, sim=sim)
    from workers.devices.agent_device_host import open_probe  # noqa: PLC0415 - Node tooling is optional

    return open_probe(spec, app=app)


def release_device(spec: str) -> bool:
    """Stop what a device spec's process left running on this host when its owner is gone or
    is this process: the agent-device daemon of its state dir (a worker calls this before its
    first run and at stop, for the daemons of its pool children). True if one was stopped;
    sim devices hold nothing."""
    check_device_spec(spec)
    if spec.startswith("sim:"):
        return False
    from workers.devices.agent_device_launch import (  # noqa: PLC0415 - Node tooling is optional
        release_daemon,
        state_dir_for,
    )

    run = release_daemon(state_dir_for(spec))
    probe = release_daemon(state_dir_for(spec, role="probe"))
    return run or probe
