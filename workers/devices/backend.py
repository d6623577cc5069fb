"""What a device backend gives the rest of goalfleet (`Backend`), and the registry that finds a
backend by the scheme of a device spec (`sim:signin-ios` → `sim`; `agent-device:linux`,
`ios:<udid>`, `android:<serial>` → `agent-device`).

A backend is a package of its own (`workers.devices.sim`, `workers.devices.agent_device`)
whose `backend` module holds its entry; adding one is a package and a line in `BACKENDS`.
"""

from __future__ import annotations

from typing import Protocol

from workers.core.app import AppConfig
from workers.core.errors import ConfigError
from workers.core.model import Platform
from workers.core.ports import DeviceHost, DevicePort
from workers.devices.agent_device.backend import AGENT_DEVICE
from workers.devices.sim.backend import SIM
from workers.devices.sim.options import SimOptions


class Backend(Protocol):
    """One device backend: the specs it serves, and its devices and hosts."""

    @property
    def name(self) -> str:
        """What `goalfleet worker --backend` calls it."""
        ...

    @property
    def schemes(self) -> tuple[str, ...]:
        """The schemes of the device specs it serves (before the first `:`)."""
        ...

    @property
    def forms(self) -> str:
        """Its spec forms, for an error message."""
        ...

    def check(self, spec: str) -> bool:
        """Whether `spec` has one of its forms (`ConfigError` naming the fix when it has one
        but names what this backend does not have)."""
        ...

    def worker_spec(self, platform: Platform, device_id: str, *, app: str, target: str) -> str:
        """The device spec of a worker started with `--backend` this backend."""
        ...

    def open_device(self, spec: str, *, seed: int, sim: SimOptions, role: str) -> DevicePort:
        """A device for `spec`, its own to close (`role`: a second one beside a run's)."""
        ...

    def open_probe(self, spec: str, *, sim: SimOptions, app: AppConfig | None) -> DevicePort:
        """A device for the quarantine probe, beside a run's, the device's reset (of `app`, the
        app the worker serves) applied before it is judged; its own to close."""
        ...

    def make_host(self, spec: str, *, sim: SimOptions, app: AppConfig | None) -> DeviceHost:
        """The host a worker keeps for `spec` across its runs. Opens nothing yet."""
        ...

    def release(self, spec: str) -> bool:
        """Stop what `spec`'s devices left running on this host (True if something was)."""
        ...


BACKENDS: tuple[Backend, ...] = (SIM, AGENT_DEVICE)
_BY_SCHEME = {scheme: b for b in BACKENDS for scheme in b.schemes}


def backend_named(name: str) -> Backend:
    for b in BACKENDS:
        if b.name == name:
            return b
    names = ", ".join(b.name for b in BACKENDS)
    raise ConfigError(f"--backend {name!r} is not a backend; use one of {names}")


def backend_for(spec: str) -> Backend:
    """The backend of a checked or unchecked spec; `ConfigError` listing every form if none."""
    backend = _BY_SCHEME.get(spec.partition(":")[0])
    if backend is None or not backend.check(spec):
        forms = ", ".join(b.forms for b in BACKENDS)
        raise ConfigError(f"--device {spec!r} is not a device spec; use {forms}")
    return backend
