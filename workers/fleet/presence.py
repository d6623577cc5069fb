"""A worker's presence: register its device with capabilities and a heartbeat lease, renew
the lease from a thread in the worker's main process, probe a quarantined device until it
recovers, and deregister on shutdown. Every Redis read and write it makes goes through the
`DeviceRegistry` (`workers.fleet.registry`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import structlog

from workers.core.errors import GoalfleetError
from workers.core.ports import DevicePort
from workers.fleet.keys import lease_holder
from workers.fleet.registry import DeviceRegistry, DeviceTakenError
from workers.fleet.runtime import WorkerSpec
from workers.settings import Settings

log = structlog.stdlib.get_logger("goalfleet.worker")


class Presence:
    def __init__(
        self,
        registry: DeviceRegistry,
        spec: WorkerSpec,
        settings: Settings,
        *,
        probe: Callable[[], DevicePort] | None = None,
    ) -> None:
        self.registry = registry
        self.spec = spec
        self.settings = settings
        self.probe = probe
        self.holder = lease_holder(spec.name)
        """This process's lease token (register, renew and deregister act only with it)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_probe = 0.0

    def register(self, *, wait_s: float | None = None) -> None:
        """Register the device; if a dead worker's lease still holds it, wait for the lease to
        expire (at most `lease_s` + 1 s by default)."""
        deadline = time.monotonic() + (self.settings.lease_s + 1 if wait_s is None else wait_s)
        while True:
            try:
                self.registry.register(self.spec.info, self.holder, lease_s=self.settings.lease_s)
            except DeviceTakenError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.25)
            else:
                return

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="goalfleet-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception):  # shutdown must go on with Redis down
            self.registry.deregister(
                self.spec.info.id, self.holder, keep_s=self.settings.retention_s
            )

    def beat_once(self) -> None:
        ok = self.registry.renew(self.spec.info.id, self.holder, lease_s=self.settings.lease_s)
        if not ok:
            log.error(
                "lease_lost", device_id=self.spec.info.id, hint="another worker took the lease"
            )
        if self.probe is not None and self.registry.quarantined(self.spec.info.id):
            now = time.monotonic()
            if now - self._last_probe >= self.settings.probe_interval_s:
                self._last_probe = now
                self._try_recover()

    def _try_recover(self) -> None:
        if self.probe is None:
            return
        try:
            device = self.probe()
            try:
                device.snapshot()
            finally:
                device.close()
        except GoalfleetError as exc:
            log.warning("quarantine_probe_failed", device_id=self.spec.info.id, error=str(exc))
            return
        log.info("quarantine_lifted", device_id=self.spec.info.id)
        self.registry.recover(self.spec.info.id)

    def _beat(self) -> None:
        while not self._stop.wait(self.settings.heartbeat_interval_s):
            try:
                self.beat_once()
            except Exception:
                log.exception("heartbeat_failed", device_id=self.spec.info.id)
