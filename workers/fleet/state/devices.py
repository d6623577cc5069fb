"""Device registration, in one place: who is registered, who holds each device's heartbeat
lease, which devices are quarantined, and every device's state as the scheduler reads it.

Writers: the worker's presence (`workers.fleet.presence`) registers, renews, deregisters,
lifts a quarantine, and says why a quarantined device stays down (its probe's failure).
Readers: the scheduler (dispatch, sweeps, submit validation, metrics) and the presence's own
quarantine check. Keys: `{p}:devices`, `{p}:device:{id}`,
`{p}:device:{id}:lease` (see `workers.fleet.keys`).

Run transitions that also move a device's `run` field or failure counters stay with the run
they change, because each must be one script with the run's own write: claim and finish
(`workers.fleet.state.runs`: finish frees the device, counts failures and quarantines);
submit, reserve, unreserve, cancel and stray release (`workers.fleet.state.queue`).

The lease holds a per-process token (`workers.fleet.keys.lease_holder`), never the worker
name, which every worker of a device shares: register refuses a live lease with another
holder; renew and deregister act only for the holder, and renew tells a lease another worker
took (stand down: `workers.fleet.fence`) from one that vanished with Redis's data (register
again). Each write is one Lua script (or one MULTI/EXEC), so a worker killed at any point
leaves the old registration or the new one.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import cast

from workers.core.errors import GoalfleetError
from workers.core.records import DeviceInfo, DeviceState
from workers.fleet.state.runs import pending_score
from workers.fleet.state.scripts import RedisStore, Script

MAX_REASON_CHARS = 300
"""A probe's reason as `goalfleet devices` shows it, at most (an app's log tail is longer)."""


class DeviceTakenError(GoalfleetError):
    """Another live worker holds this device's lease."""

    code = "DEVICE_TAKEN"


class Renewal(StrEnum):
    """What a heartbeat found (`DeviceRegistry.renew`)."""

    RENEWED = "renewed"  # the lease is this holder's, extended (or taken back after a lapse)
    VANISHED = "vanished"  # no lease and no other holder: Redis lost it; register again
    TAKEN = "taken"  # another worker holds the device: stand down


class DeviceRegistry(RedisStore):
    """Every read and write of device registration. Thread-safe (redis-py pools connections):
    the worker's heartbeat thread and its main process share one."""

    _register = Script("register")
    _renew = Script("renew")
    _deregister = Script("deregister")
    _probe_failed = Script("probe_failed")

    # -- writes (the worker's presence) -----------------------------------------------------

    def register(self, info: DeviceInfo, holder: str, *, lease_s: float) -> None:
        """Take the device's lease for `holder` (a `lease_holder` token); DeviceTakenError when
        another live holder has it."""
        other = self._register(
            keys=[self.k.lease(info.id), self.k.device(info.id), self.k.devices, self.k.wake],
            args=[holder, int(lease_s * 1000), info.model_dump_json(), repr(time.time()), info.id],
        )
        if other:
            raise DeviceTakenError(
                f"device {info.id!r} is held by another live worker ({other}); stop it first, "
                "or wait for its lease to expire"
            )

    def renew(self, device_id: str, holder: str, *, lease_s: float) -> Renewal:
        """Extend `holder`'s lease: RENEWED, VANISHED (no lease and no other holder: register
        again) or TAKEN (another holder has it, or registered since it lapsed)."""
        return Renewal(
            self._renew(
                keys=[
                    self.k.lease(device_id),
                    self.k.wake,
                    self.k.device(device_id),
                    self.k.devices,
                ],
                args=[holder, int(lease_s * 1000), device_id],
            )
        )

    def deregister(self, device_id: str, holder: str, *, keep_s: int) -> bool:
        """Give the device up (only if `holder` holds its lease); a run reserved for it and not
        yet claimed goes back to pending, in the same script."""
        for _ in range(20):
            run_id = cast("str | None", self.r.hget(self.k.device(device_id), "run")) or ""
            score = 0.0
            if run_id:
                prio, submitted = cast(
                    "list[str | None]",
                    self.r.hmget(self.k.run(run_id), ["priority", "submitted_at"]),
                )
                score = pending_score(int(prio or 0), float(submitted or 0))
            out = int(
                cast(
                    "int",
                    self._deregister(
                        keys=[
                            self.k.lease(device_id),
                            self.k.device(device_id),
                            self.k.devices,
                            self.k.run(run_id or "-"),
                            self.k.pending,
                            self.k.reserved,
                            self.k.wake,
                            self.k.running,
                        ],
                        args=[holder, device_id, keep_s, run_id, score],
                    ),
                )
            )
            if out >= 0:
                return bool(out)
        return False

    def recover(self, device_id: str) -> None:
        """Lift a quarantine after a successful probe; the scheduler is woken to dispatch."""
        with self.r.pipeline(transaction=True) as p:
            p.hset(
                self.k.device(device_id),
                mapping={"quarantined": "0", "quarantine_reason": "", "infra_failures": "0"},
            )
            p.rpush(self.k.wake, device_id)
            p.execute()

    def probe_failed(self, device_id: str, why: str) -> bool:
        """A quarantined device's probe failed: `down: <why>` becomes its quarantine reason
        (True), unless it is no longer quarantined (False)."""
        reason = f"down: the probe failed: {why}"[:MAX_REASON_CHARS]
        return bool(self._probe_failed(keys=[self.k.device(device_id)], args=[reason]))

    # -- reads ------------------------------------------------------------------------------

    def quarantined(self, device_id: str) -> bool:
        return self.r.hget(self.k.device(device_id), "quarantined") == "1"

    def device_ids(self) -> list[str]:
        """Registered devices, sorted (a device leaves the set when it deregisters)."""
        return sorted(cast("set[str]", self.r.smembers(self.k.devices)))

    def devices(self) -> list[DeviceState]:
        """Every registered device's state; `alive` while its worker holds the lease."""
        ids = self.device_ids()
        with self.r.pipeline(transaction=False) as p:
            for did in ids:
                p.hgetall(self.k.device(did))
                p.exists(self.k.lease(did))
            out = p.execute()
        states = []
        for i in range(len(ids)):
            raw = cast("dict[str, str]", out[2 * i])
            if raw.get("info"):
                states.append(DeviceState.from_hash(raw, alive=bool(out[2 * i + 1])))
        return states
