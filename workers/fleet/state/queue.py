"""The scheduler's side of the run state machine: submit runs and batches (with
idempotency), reserve a device for a pending run, undo or release a reservation, cancel, and
expire a run no device can take. The worker's side (claim, steps, finish, hand back) is
`workers.fleet.state.runs`; devices are `workers.fleet.state.devices`. Reserve, unreserve,
cancel and stray release also set or clear a device's `run` field, in the same script as the
run's write.

Every write that must be all-or-nothing is one Lua script (`lua/`), so a crash at any point
leaves nothing half-written.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import redis

from workers.core.model import RunResult, RunStatus
from workers.core.records import BatchRecord, RunRecord
from workers.fleet.keys import Keys
from workers.fleet.state.runs import RunStore, pending_score
from workers.fleet.state.scripts import RedisStore, Script


@dataclass(frozen=True)
class Idempotency:
    key: str
    body_hash: str


@dataclass(frozen=True)
class Submitted:
    """What `FleetStore.submit_one` did: `existing` (the idempotency key's value: nothing
    written), `full` (the backlog is at its cap: nothing written), `reserved` (written and
    reserved for the device tried, at `dispatched_at`) or `pending` (written, pending, the
    scheduler woken)."""

    kind: Literal["existing", "full", "reserved", "pending"]
    existing: str | None = None
    dispatched_at: float | None = None


LAPSE_SLICE = 1000
"""Running runs one lapse-finding script reads (about 10 ms of Redis on 2 cores, loaded)."""


class RunQueue(RedisStore):
    """Every scheduler-side transition of a run (see `workers.fleet.state`)."""

    _create = Script("create")
    _submit_one = Script("submit_one")
    _reserve = Script("reserve")
    _resend = Script("resend")
    _unreserve = Script("unreserve")
    _cancel = Script("cancel")
    _release_stray = Script("release_stray")
    _find_lapsed = Script("find_lapsed")
    _release_lapsed = Script("release_lapsed")
    _forget_running = Script("forget_running")
    _expire = Script("expire")
    _release_held = Script("release_held")

    def __init__(self, client: redis.Redis, keys: Keys, *, retention_s: int) -> None:
        super().__init__(client, keys)
        self.retention_s = retention_s
        self.runs = RunStore(client, keys)
        """The worker's side of runs: their loads (and, for the sweeps, `finish`)."""

    # -- submit ----------------------------------------------------------------------------

    def create(
        self,
        runs: list[RunRecord],
        *,
        batch: BatchRecord | None = None,
        idem: Idempotency | None = None,
        webhook: str | None = None,
    ) -> str | None:
        """Write runs (and their batch) as pending, all or nothing. With an idempotency key
        already used, write nothing and return what it names (`run:<id>` / `batch:<id>`,
        then `|` and the body hash). A batch holds the first run's request once; a run with
        a request of its own (a suite's other flows) keeps it. `webhook`: the batch's URL
        for its events (`scheduler.service.webhooks`)."""
        ref = f"batch:{batch.id}" if batch else f"run:{runs[0].id}"
        keys = [
            self.k.idem(idem.key) if idem is not None else "-",
            self.k.pending,
            self.k.runs,
            self.k.batch(batch.id) if batch is not None else "-",
            self.k.batch_runs(batch.id) if batch is not None else "-",
        ]
        args: list[str | int | float] = [
            f"{ref}|{idem.body_hash}" if idem is not None else "",
            self.retention_s if idem is not None else 0,
            # a batch outlives its runs by a day so its counts stay readable
            self.retention_s + 86400 if self.retention_s else 0,
        ]
        if batch is None:
            args.append(0)
        else:
            batch_fields: dict[str, str | int] = {
                "id": batch.id,
                "total": batch.total,
                "finished": 0,
                "created_at": repr(batch.created_at),
                "goal": batch.goal,
                "request": runs[0].request.model_dump_json(),
                "owner": batch.owner or "",
                "suite": batch.suite or "",
                "webhook": webhook or "",
            }
            args += [2 * len(batch_fields), *(x for pair in batch_fields.items() for x in pair)]
        for run in runs:
            fields = run.to_hash()
            if batch is not None and run.request is runs[0].request:
                fields["request"] = ""  # the batch holds it, once (`request_on_batch`)
            keys.append(self.k.run(run.id))
            args += [run.id, pending_score(run.priority, run.submitted_at), run.submitted_at]
            args += [2 * len(fields), *(x for pair in fields.items() for x in pair)]
        return cast("str | None", self._create(keys=keys, args=args))

    def submit_one(
        self,
        run: RunRecord,
        *,
        idem: Idempotency | None,
        max_pending: int,
        device: str | None,
    ) -> Submitted:
        """Write one run, all or nothing, in one round trip (`_SUBMIT_ONE`): refused when
        `max_pending` runs are pending already (0: no limit), a replay when the idempotency
        key was used, else pending or, when `device` is free, reserved for it (the caller
        then sends the run's message: `scheduler.store.enqueue`)."""
        device_id = device
        now = time.time()
        idem_key = self.k.idem(idem.key) if idem is not None else self.k.idem("-")
        fields = run.to_hash()
        flat = [x for pair in fields.items() for x in pair]
        reply = cast(
            "list[str]",
            self._submit_one(
                keys=[
                    self.k.run(run.id),
                    self.k.pending,
                    idem_key,
                    self.k.device(device_id or "-"),
                    self.k.lease(device_id or "-"),
                    self.k.reserved,
                    self.k.wake,
                    self.k.runs,
                ],
                args=[
                    run.id,
                    pending_score(run.priority, run.submitted_at),
                    max_pending,
                    f"run:{run.id}|{idem.body_hash}" if idem is not None else "",
                    self.retention_s if idem is not None else 0,
                    device_id or "",
                    repr(now),
                    *flat,
                ],
            ),
        )
        kind = reply[0]
        if kind == "existing":
            return Submitted("existing", existing=reply[1])
        if kind == "reserved":
            return Submitted("reserved", dispatched_at=now)
        return Submitted("full" if kind == "full" else "pending")

    # -- dispatch --------------------------------------------------------------------------

    def reserve(self, run_id: str, device_id: str) -> float | None:
        """Atomically give a pending run to an idle, live, unquarantined device; the
        `dispatched_at` it wrote (the caller then sends the run's message), or None when it
        did not."""
        now = time.time()
        return now if self.reserve_many([(run_id, device_id)], now=now)[0] else None

    def reserve_many(
        self, pairs: Sequence[tuple[str, str]], *, now: float | None = None
    ) -> list[bool]:
        """`reserve` for each (run id, device id) of a dispatch pass, in one script and one
        round trip, each pair on its own (`lua/reserve.lua`): whether each was reserved, at
        `now` (the callers then send those runs' messages)."""
        if not pairs:
            return []
        keys = [self.k.pending, self.k.reserved]
        args: list[object] = [repr(time.time() if now is None else now)]
        for run_id, device_id in pairs:
            keys += [self.k.run(run_id), self.k.device(device_id), self.k.lease(device_id)]
            args += [run_id, device_id]
        return [bool(x) for x in cast("list[int]", self._reserve(keys=keys, args=args))]

    def resend(self, run_id: str, device_id: str) -> bool:
        """A reservation `device_id` still holds, never claimed, is due its message again (its
        reservation time is now: the caller sends it); False when the run is no longer
        reserved for that device (send nothing)."""
        return bool(
            self._resend(
                keys=[self.k.run(run_id), self.k.device(device_id), self.k.reserved],
                args=[run_id, device_id, repr(time.time())],
            )
        )

    def unreserve(self, run: RunRecord, device_id: str) -> bool:
        """A reservation whose device is down goes back: the run is pending again."""
        return bool(
            self._unreserve(
                keys=[
                    self.k.run(run.id),
                    self.k.device(device_id),
                    self.k.pending,
                    self.k.reserved,
                    self.k.running,
                ],
                args=[run.id, device_id, pending_score(run.priority, run.submitted_at)],
            )
        )

    def forget_running(self, run_id: str, claimed_at: float) -> None:
        """Drop a stale `running` entry, unless the run was claimed again since it was read
        (a new claim time)."""
        self._forget_running(keys=[self.k.running], args=[run_id, repr(claimed_at)])

    def forget_reservation(self, run_id: str) -> None:
        """Drop the index entry of a run that no longer exists."""
        self.r.zrem(self.k.reserved, run_id)

    def release_stray(self, run: RunRecord) -> bool:
        """Re-pend `run` if it is reserved for a device that no registered device record
        holds it for (see `_RELEASE_STRAY`)."""
        device_id = run.device or ""
        return bool(
            self._release_stray(
                keys=[
                    self.k.run(run.id),
                    self.k.device(device_id or "-"),
                    self.k.pending,
                    self.k.reserved,
                    self.k.devices,
                    self.k.running,
                ],
                args=[run.id, device_id, pending_score(run.priority, run.submitted_at)],
            )
        )

    def release_lapsed(self, *, slice_size: int = LAPSE_SLICE) -> list[tuple[str, str]]:
        """Re-pend every running run whose claiming worker no longer holds its device's lease
        (`lua/release_lapsed.lua`): its worker died, or stopped for longer than the lease.
        A read-only script finds them, `slice_size` running runs at a time
        (`lua/find_lapsed.lua`), then one script per run found checks again and moves it;
        (run id, device id) of each run re-pended. (A run the index moves past between two
        slices is seen at the next check.)"""
        found: list[str] = []
        start = 0
        while True:
            reply = cast(
                "list[str]",
                self._find_lapsed(
                    keys=[self.k.running],
                    args=[self.k.prefix, start, start + slice_size - 1],
                ),
            )
            found += reply[1:]
            if int(reply[0]) < slice_size:
                break
            start += slice_size
        released = []
        for i in range(0, len(found), 5):
            rid, device, claim, prio, submitted = found[i : i + 5]
            score = pending_score(int(prio or 0), float(submitted or 0))
            if self._release_lapsed(
                keys=[
                    self.k.run(rid),
                    self.k.device(device),
                    self.k.lease(device),
                    self.k.pending,
                    self.k.reserved,
                    self.k.running,
                    self.k.wake,
                ],
                args=[rid, device, claim, score],
            ):
                released.append((rid, device))
        return released

    def release_held(self, run_ids: list[str], *, keep_s: int) -> None:
        """Runs a history writer has stored leave its outbox, and their retention (`keep_s`,
        0: for good) starts as it would have at their end (`lua/lib/keep.lua`, its one owner)."""
        keys = [self.k.history_outbox]
        for rid in run_ids:
            keys += self.k.run_and_steps(rid)
        self._release_held(keys=keys, args=[keep_s])

    # -- cancel ----------------------------------------------------------------------------

    def cancel(self, run_id: str) -> str:
        """`cancelled` (it was queued), `requested` (running: the worker stops between steps),
        `terminal:<status>`, or `missing`."""
        for _ in range(20):
            run = self.runs.load(run_id)
            if run is None:
                return "missing"
            result = RunResult(
                status=RunStatus.CANCELLED,
                reason="cancelled by the caller",
                goal=run.request.goal,
                run_id=run.id,
                device_id=run.device,
                attempt=run.attempt,
            )
            out = cast(
                "str",
                self._cancel(
                    keys=[
                        *self.k.run_and_steps(run_id),
                        self.k.device(run.device or "-"),
                        self.k.pending,
                        self.k.batch_of(run.batch),
                        self.k.wake,
                        self.k.reserved,
                        self.k.running,
                    ],
                    args=[
                        run_id,
                        run.device or "",
                        result.model_dump_json(),
                        repr(time.time()),
                        self.retention_s,
                    ],
                ),
            )
            if out != "retry":
                return out
        return "retry"

    def expire_unplaceable(self, run_id: str, *, after_s: float, reason: str = "") -> bool:
        """End a pending, unreserved run `unplaceable` (the caller found that no registered
        device matches it, or `reason`); False if it was placed, cancelled or ended meanwhile."""
        run = self.runs.load(run_id)
        if run is None:
            return False
        reason = reason or f"no registered device can take it (waited {after_s:g} s)"
        result = RunResult(
            status=RunStatus.UNPLACEABLE,
            reason=reason,
            goal=run.request.goal,
            run_id=run.id,
            attempt=run.attempt,
        )
        return bool(
            self._expire(
                keys=[*self.k.run_and_steps(run_id), self.k.pending, self.k.batch_of(run.batch)],
                args=[
                    run_id,
                    result.model_dump_json(),
                    repr(time.time()),
                    self.retention_s,
                    reason,
                ],
            )
        )
