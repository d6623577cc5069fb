"""A worker's presence: register its device with capabilities and a heartbeat lease, renew
the lease from a thread in the worker's main process, probe a quarantined device until it
recovers, and deregister on shutdown. Every Redis read and write it makes goes through the
`DeviceRegistry` (`workers.fleet.state.devices`).

Each beat ends one of four ways:

- RENEWED: the lease is extended, and so is the fence (`workers.fleet.fence`) the run task
  checks before every device action.
- VANISHED: no lease and no other holder (Redis lost its data): the device is registered
  again at this beat (`presence_repaired`, logged once per repair).
- TAKEN, or the fence expired (the lease went unrenewed longer than its validity: a pause, a
  partition, a long outage — a replacement may legitimately hold the device now): the worker
  stands down (`lease_lost_standing_down`), for good: the fence is closed, the run in flight
  aborts before its next device action, and `on_lost` stops the worker.
- a Redis outage (`workers.fleet.outages.is_outage`): logged once, the next beat backs off
  (with jitter, at most a quarter of the lease); never a deregistration.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import structlog

from workers.core.backoff import Backoff
from workers.core.errors import GoalfleetError
from workers.core.ports import DevicePort
from workers.fleet.fence import Fence
from workers.fleet.keys import lease_holder
from workers.fleet.outages import is_outage
from workers.fleet.runtime import WorkerSpec
from workers.fleet.state.devices import DeviceRegistry, DeviceTakenError, Renewal
from workers.settings import Settings

log = structlog.stdlib.get_logger("goalfleet.worker")

MAX_BACKOFF_DOUBLINGS = 4


class Presence:
    def __init__(
        self,
        registry: DeviceRegistry,
        spec: WorkerSpec,
        settings: Settings,
        *,
        probe: Callable[[], DevicePort] | None = None,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.registry = registry
        self.spec = spec
        self.settings = settings
        self.probe = probe
        self.on_lost = on_lost
        """Called once, from the heartbeat thread, when the worker stands down (the reason)."""
        self.fence = Fence(spec.info.id, lease_holder(spec.name), lease_s=settings.lease_s)
        """This process's lease (its token; made before the pool forks, shared with it)."""
        self.holder = self.fence.holder
        """This process's lease token (register, renew and deregister act only with it)."""
        self.lost_reason = ""
        """Why the worker stood down ('' while it holds its device)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_probe = 0.0
        self._outage_beats = 0

    @property
    def standing_down(self) -> bool:
        return bool(self.lost_reason)

    def register(self, *, wait_s: float | None = None) -> None:
        """Register the device; if a dead worker's lease still holds it, wait for the lease to
        expire (at most `lease_s` + 1 s by default)."""
        deadline = time.monotonic() + (self.settings.lease_s + 1 if wait_s is None else wait_s)
        while True:
            sent = time.monotonic_ns()
            try:
                self.registry.register(self.spec.info, self.holder, lease_s=self.settings.lease_s)
            except DeviceTakenError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.25)
            else:
                self.fence.granted(sent)
                return

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="goalfleet-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception):  # shutdown must go on with Redis down
            self.registry.deregister(
                self.spec.info.id, self.holder, keep_s=self.settings.retention_s
            )

    def beat_once(self) -> Renewal | None:
        """One heartbeat: what the registry said, or None (standing down, or an outage)."""
        if self.standing_down or self._stop.is_set():
            return None
        if self.fence.lost:
            self._stand_down(
                "another worker holds the device's lease"
                if self.fence.taken
                else f"the lease went unrenewed for longer than its validity "
                f"({self.settings.lease_s:g} s less the drift margin): a pause, a partition "
                "or an outage; a replacement may hold the device now"
            )
            return None
        try:
            state = self._renew()
        except Exception as exc:
            if not is_outage(exc):
                raise
            self._outage(exc)
            return None
        if state is Renewal.TAKEN:
            self._stand_down("another worker holds the device's lease")
        return state

    def _renew(self) -> Renewal:
        sent = time.monotonic_ns()
        state = self.registry.renew(self.spec.info.id, self.holder, lease_s=self.settings.lease_s)
        self._recovered()
        if state is Renewal.VANISHED:
            return self._repair(sent)
        if state is Renewal.RENEWED:
            if not self.fence.renewed(sent):
                self._stand_down("the lease was renewed only after the fence had expired")
            else:
                self._maybe_probe()
        return state

    def _repair(self, sent: int) -> Renewal:
        """The registration vanished with nobody else holding the device: register again."""
        if self._stop.is_set():
            return Renewal.VANISHED  # shutting down: the deregister made it vanish
        try:
            self.registry.register(self.spec.info, self.holder, lease_s=self.settings.lease_s)
        except DeviceTakenError:
            return Renewal.TAKEN  # another worker registered first
        self.fence.granted(sent)
        log.warning(
            "presence_repaired",
            device_id=self.spec.info.id,
            hint="the device's lease and registration were gone (Redis lost its data); "
            "registered again",
        )
        return Renewal.VANISHED

    def _stand_down(self, why: str) -> None:
        if self.standing_down:
            return
        self.lost_reason = why
        self.fence.lose()
        log.error(
            "lease_lost_standing_down",
            device_id=self.spec.info.id,
            worker=self.spec.name,
            reason=why,
            hint="the worker stops consuming, hands its run back and exits with status 3",
        )
        if self.on_lost is not None:
            self.on_lost(why)

    def _outage(self, exc: BaseException) -> None:
        self._outage_beats += 1
        if self._outage_beats == 1:
            log.warning(
                "heartbeat_outage",
                device_id=self.spec.info.id,
                error=f"{type(exc).__name__}: {exc}"[:300],
                fence_left_s=round(self.fence.remaining_s(), 3),
                hint="beating on with backoff; the worker stands down if it lasts longer "
                "than the lease",
            )

    def _recovered(self) -> None:
        if self._outage_beats:
            log.info("heartbeat_recovered", device_id=self.spec.info.id, beats=self._outage_beats)
        self._outage_beats = 0

    def next_delay_s(self) -> float:
        """The heartbeat interval; during an outage it doubles per failed beat, with jitter,
        up to a quarter of the lease (so a recovery is seen well before the fence expires)."""
        base = self.settings.heartbeat_interval_s
        if not self._outage_beats:
            return base
        cap = min(base * 2.0**MAX_BACKOFF_DOUBLINGS, max(base, self.settings.lease_s / 4))
        return Backoff(base_s=base, cap_s=cap, jitter=0.2).delay(self._outage_beats - 1)

    def _maybe_probe(self) -> None:
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
            # its message only: a hint may quote the app's log, which is the app's own output
            self.registry.probe_failed(self.spec.info.id, exc.message)
            return
        log.info("quarantine_lifted", device_id=self.spec.info.id)
        self.registry.recover(self.spec.info.id)

    def _beat(self) -> None:
        while not self._stop.wait(self.next_delay_s()):
            try:
                self.beat_once()
            except Exception:
                log.exception("heartbeat_failed", device_id=self.spec.info.id)
            if self.standing_down:
                return
