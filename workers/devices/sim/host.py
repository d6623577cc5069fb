"""`SimHost`: the `DeviceHost` of a sim worker. A sim device is made fresh for every run (its
app starts on its first screen), so every reset policy holds by construction; the host only
checks the app a run asks for against the worker's."""

from __future__ import annotations

import zlib

from workers.core.app import AppConfig, AppRequest, AppUnderTest, ResetPolicy, app_for_run
from workers.devices.sim.device import DEFAULT_SIM, SimDevice, SimOptions, make_sim_device

__all__ = ["SimHost"]


class SimHost:
    def __init__(
        self, spec: str, *, sim: SimOptions = DEFAULT_SIM, app: AppConfig | None = None
    ) -> None:
        self.spec = spec
        self.sim = sim
        self.served = app

    def prepare(self, asked: AppRequest | None, reset: ResetPolicy | None) -> AppUnderTest | None:
        if self.served is None and asked is None:
            return None  # a fresh sim app each run: whatever reset was asked for holds
        return app_for_run(self.served, asked, reset)

    def open(self, run_id: str) -> SimDevice:
        return make_sim_device(
            self.spec,
            latency_scale=self.sim.latency_scale,
            seed=zlib.crc32(run_id.encode()),
            faults=self.sim.faults,
            session_log=self.sim.session_log,
        )

    def close(self) -> None:
        return None
