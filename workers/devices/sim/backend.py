"""The sim backend's entry in the registry (`workers.devices.backend`)."""

from __future__ import annotations

from workers.core.app import AppConfig
from workers.core.errors import ConfigError
from workers.core.model import Platform
from workers.core.ports import DeviceHost, DevicePort
from workers.devices.sim.apps import APPS
from workers.devices.sim.options import SimOptions

__all__ = ["SIM"]


class SimBackend:
    """`sim:<app>-<ios|android>`: an in-process `SimDevice` (apps: `sim.apps.APPS`)."""

    name = "sim"
    schemes = ("sim",)
    forms = "sim:<app>-<ios|android> (e.g. sim:signin-ios)"

    def check(self, spec: str) -> bool:
        from workers.devices.sim.device import SPEC  # noqa: PLC0415 - the device, when used

        m = SPEC.fullmatch(spec)
        if m is None:
            return False
        if m.group("app") not in APPS:
            known = ", ".join(f"sim:{a}-ios" for a in sorted(APPS))
            raise ConfigError(f"unknown sim app in --device {spec!r}; known: {known} (or -android)")
        return True

    def worker_spec(self, platform: Platform, device_id: str, *, app: str, target: str) -> str:  # noqa: ARG002 - the sim has no target
        if platform is Platform.LINUX:
            raise ConfigError("--backend sim has iOS and Android apps only; use --platform ios")
        return f"sim:{app}-{platform.value}"

    def open_device(self, spec: str, *, seed: int, sim: SimOptions, role: str) -> DevicePort:  # noqa: ARG002 - a sim device is its own
        from workers.devices.sim.device import make_sim_device  # noqa: PLC0415 - one per backend

        return make_sim_device(
            spec,
            latency_scale=sim.latency_scale,
            seed=seed,
            faults=sim.faults,
            session_log=sim.session_log,
        )

    def open_probe(self, spec: str, *, sim: SimOptions, app: AppConfig | None) -> DevicePort:  # noqa: ARG002 - a sim app starts with its device
        return self.open_device(spec, seed=0, sim=sim, role="probe")

    def make_host(self, spec: str, *, sim: SimOptions, app: AppConfig | None) -> DeviceHost:
        from workers.devices.sim.host import SimHost  # noqa: PLC0415 - one per backend

        return SimHost(spec, sim=sim, app=app)

    def release(self, spec: str) -> bool:  # noqa: ARG002 - sim devices hold nothing
        return False


SIM = SimBackend()
