"""The agent-device backend's entry in the registry (`workers.devices.backend`). Its modules
are imported when used: Node tooling is optional on a host that runs sim devices only."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from workers.core.model import Platform

if TYPE_CHECKING:
    from workers.core.app import AppConfig
    from workers.core.ports import DeviceHost, DevicePort
    from workers.devices.sim.options import SimOptions  # the registry's one signature

__all__ = ["AGENT_DEVICE", "SPEC"]

SPEC = re.compile(r"^(?:agent-device:linux|ios:[A-Za-z0-9-]+|android:[A-Za-z0-9.:_-]+)$")


class AgentDeviceBackend:
    """`agent-device:linux`, `ios:<udid>`, `android:<serial>`: the agent-device daemon."""

    name = "agent-device"
    schemes = ("agent-device", "ios", "android")
    forms = "agent-device:linux, ios:<udid> or android:<serial>"

    def check(self, spec: str) -> bool:
        return SPEC.fullmatch(spec) is not None

    def worker_spec(self, platform: Platform, device_id: str, *, app: str, target: str) -> str:  # noqa: ARG002 - an app is the run's
        if target:
            return target
        if platform is Platform.LINUX:
            return "agent-device:linux"
        return f"{platform.value}:{device_id}"

    def open_device(self, spec: str, *, seed: int, sim: SimOptions, role: str) -> DevicePort:  # noqa: ARG002 - sim options are the sim's
        from workers.devices.agent_device.host import open_device  # noqa: PLC0415 - Node tooling

        return open_device(spec, role=role)

    def open_probe(self, spec: str, *, sim: SimOptions, app: AppConfig | None) -> DevicePort:  # noqa: ARG002 - sim options are the sim's
        from workers.devices.agent_device.host import open_probe  # noqa: PLC0415 - Node tooling

        return open_probe(spec, app=app)

    def make_host(self, spec: str, *, sim: SimOptions, app: AppConfig | None) -> DeviceHost:  # noqa: ARG002
        from workers.devices.agent_device.host import AgentDeviceHost  # noqa: PLC0415 - Node tooling

        return AgentDeviceHost(spec, app=app)

    def release(self, spec: str) -> bool:
        """The daemons of `spec`'s state dirs (the run's and the probe's), when their owner is
        gone or is this process."""
        from workers.devices.agent_device.launch import (  # noqa: PLC0415 - Node tooling
            release_daemon,
            state_dir_for,
        )

        run = release_daemon(state_dir_for(spec))
        probe = release_daemon(state_dir_for(spec, role="probe"))
        return run or probe


AGENT_DEVICE = AgentDeviceBackend()
