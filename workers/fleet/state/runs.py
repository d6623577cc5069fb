"""The worker's side of the run state machine: claim a run, write its steps, finish it, hand it
back. The device's registration and heartbeat lease are `workers.fleet.state.devices`.

Every write that must be all-or-nothing is one Lua script, so a worker killed at any point
leaves either the old state or the new one, never half of each. Writes to a run are fenced
twice: by the claim token (a zombie execution, its message redelivered elsewhere, cannot
overwrite) and by the worker's device lease: the claim, every step write and the finish check,
in the same script, that the worker's lease token (`workers.fleet.fence.Fence`) still holds
the device's lease, and raise `LeaseLostError` when it does not. A worker that lost its lease
hands its run back to pending (`hand_back`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, cast

import redis

from workers.core.errors import GoalfleetError
from workers.core.model import RunResult, StepRow
from workers.core.records import RunRecord
from workers.fleet.fence import Fence, LeaseLostError
from workers.fleet.keys import Keys
from workers.fleet.state.scripts import RedisStore, Script
from workers.fleet.state.states import PRIORITY_SPAN, Failure


def pending_score(priority: int, submitted_at: float) -> float:
    """A queued run's score in the pending index (`PRIORITY_SPAN`)."""
    return priority * PRIORITY_SPAN + int(submitted_at * 1000)


class ClaimLostError(GoalfleetError):
    """This execution no longer owns the run (it was redelivered, cancelled or finished)."""

    code = "CLAIM_LOST"


class ClaimKind(StrEnum):
    CLAIMED = "claimed"  # this execution owns the run now (attempt counted)
    EXHAUSTED = "exhausted"  # redelivered past the attempt cap: finish it errored
    TERMINAL = "terminal"  # the run already ended (a duplicate or a cancelled queued run)
    ELSEWHERE = "elsewhere"  # the run was re-dispatched to another device
    MISSING = "missing"  # no such run (expired, or never written)


@dataclass(frozen=True)
class Claim:
    kind: ClaimKind
    attempt: int = 0
    token: str = ""
    record: RunRecord | None = None
    """The run as the claim left it (running on this device, its attempt, worker and start
    time), read by the claim script itself: CLAIMED and EXHAUSTED only."""


STEP_CANCEL = 2
"""The step script's answer when the rows were written and a cancel was requested."""

Recall = tuple[str, str, int]
"""A decision-memory entry to read with step rows: its key, the time now, its TTL."""


@dataclass(frozen=True)
class Written:
    """What a step write read in its own script."""

    cancel: bool
    """A cancel of the run was requested."""
    entry: list[str] = field(default_factory=list)
    """The memory entry asked for (`Recall`), its hash flat (name, value, ...); empty when
    there is none."""


def row_args(rows: Iterable[StepRow]) -> list[object]:
    """Step rows as the step and finish scripts take them: index, row, picture id ('')."""
    return [a for r in rows for a in (r.index, r.model_dump_json(), r.screenshot or "")]


def _pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


BATCH_REQUESTS_KEPT = 64
"""Batch requests a store keeps in memory (`RunStore._batch_request`): a batch's request is
written once and never changes, so its runs after the first cost no read of it."""

TAKEN, LAPSED = -1, -2
"""What a fenced script (`lua/lib/lease.lua`) returns when the caller's lease token no longer
holds the device's lease: another holder has it, or nobody does."""


def check_fence(out: object, fence: Fence | None, what: str) -> None:
    """Raise `LeaseLostError` for a fenced script's -1 or -2."""
    if fence is None or out not in (TAKEN, LAPSED, str(TAKEN), str(LAPSED)):
        return
    taken = out in (TAKEN, str(TAKEN))
    why = "another worker holds" if taken else "nobody holds (it lapsed or vanished)"
    raise LeaseLostError(
        f"{what} refused: {why} the lease of device {fence.device_id!r}", taken=taken
    )


class RunStore(RedisStore):
    """Worker-side operations on the shared store. Thread-safe (redis-py pools connections)."""

    _claim = Script("claim")
    _step = Script("step")
    _finish = Script("finish")
    _hand_back = Script("hand_back")

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        super().__init__(client, keys)
        self._batch_requests: dict[str, str] = {}

    def _lease(self, fence: Fence | None, device_id: str) -> tuple[str, str]:
        """The lease key and the holder token a fenced script gets ('' when unfenced)."""
        if fence is None:
            return self.k.lease(device_id), ""
        return self.k.lease(fence.device_id), fence.holder

    def load(self, run_id: str) -> RunRecord | None:
        return self._record(cast("dict[str, str]", self.r.hgetall(self.k.run(run_id))))

    def _record(self, raw: dict[str, str]) -> RunRecord | None:
        """A run hash as a record (None when empty); a batch run's request is read from its
        batch, which stores it once."""
        if batch_id := RunRecord.request_on_batch(raw):
            raw["request"] = self._batch_request(batch_id)
        return RunRecord.from_hash(raw) if raw else None

    def _batch_request(self, batch_id: str) -> str:
        """The batch's request as stored on it, read once (`BATCH_REQUESTS_KEPT`)."""
        kept = self._batch_requests.get(batch_id)
        if kept is not None:
            return kept
        request = cast("str", self.r.hget(self.k.batch(batch_id), "request") or "")
        if request:
            if len(self._batch_requests) >= BATCH_REQUESTS_KEPT:  # the older half goes
                for old in list(self._batch_requests)[: BATCH_REQUESTS_KEPT // 2]:
                    self._batch_requests.pop(old, None)  # (threads may share the store)
            self._batch_requests[batch_id] = request
        return request

    def claim(
        self, run_id: str, device_id: str, worker: str, *, cap: int, fence: Fence | None = None
    ) -> Claim:
        """Claim the run for this execution (compare-and-set); `LeaseLostError` when `fence`'s
        token does not hold the device's lease (None: unfenced, for tests of the record)."""
        token = uuid.uuid4().hex
        lease, holder = self._lease(fence, device_id)
        reply = cast(
            "list[Any]",
            self._claim(
                keys=[
                    *self.k.run_and_steps(run_id),
                    self.k.device(device_id),
                    self.k.reserved,
                    lease,
                    self.k.running,
                ],
                args=[device_id, worker, cap, token, repr(time.time()), run_id, holder],
            ),
        )
        kind, attempt = str(reply[0]), str(reply[1])
        if kind == "lease":
            check_fence(attempt, fence, f"claiming run {run_id}")
        claim = Claim(kind=ClaimKind(kind), attempt=int(attempt), token=token)
        if claim.kind not in {ClaimKind.CLAIMED, ClaimKind.EXHAUSTED}:
            return claim
        record = self._record(_pairs(reply[2]))  # the run hash as the claim left it
        return replace(claim, record=record)

    def write_step(
        self, run_id: str, token: str, row: StepRow, *, fence: Fence | None = None
    ) -> bool:
        """`write_steps` of one row; True when a cancel of the run was requested."""
        return self.write_steps(run_id, token, [row], fence=fence).cancel

    def write_steps(
        self,
        run_id: str,
        token: str,
        rows: Sequence[StepRow],
        *,
        fence: Fence | None = None,
        recall: Recall | None = None,
    ) -> Written:
        """Upsert step rows on (run_id, index), so clients can tail them, and read what rides
        with them in the same script: whether a cancel of the run was requested (the worker's
        check before its next action costs no round trip of its own) and, with `recall`, a
        decision-memory entry (`lua/lib/memory.lua`'s `recall_entry`). `ClaimLostError` when
        the claim moved on; `LeaseLostError` when `fence`'s token no longer holds the
        device's lease."""
        lease, holder = self._lease(fence, "-")
        keys = [*self.k.run_and_steps(run_id), lease, self.k.pictures(run_id)]
        args: list[object] = [token, holder, *(recall[1:] if recall else ("", 0))]
        if recall is not None:
            keys.append(recall[0])
        reply = cast("list[Any]", self._step(keys=keys, args=[*args, *row_args(rows)]))
        code = reply[0]
        first = rows[0].index if rows else "-"
        check_fence(code, fence, f"step {first} of run {run_id}")
        if not code:
            raise ClaimLostError(f"run {run_id} is no longer claimed by this execution")
        return Written(cancel=code == STEP_CANCEL, entry=reply[1] if recall is not None else [])

    def cancel_requested(self, run_id: str) -> bool:
        return self.r.hget(self.k.run(run_id), "cancel") == "1"

    def finish(
        self,
        record: RunRecord,
        token: str,
        result: RunResult,
        *,
        failure: Failure,
        quarantine_after: int,
        retention_s: int,
        fence: Fence | None = None,
        rows: Sequence[StepRow] = (),
    ) -> bool:
        """Write the final result (and the step `rows` not yet written), free the device,
        count the batch: all or nothing. False
        when the claim moved on; `LeaseLostError` when `fence`'s token no longer holds the
        device's lease (None: the scheduler ending an overdue run, which holds no lease)."""
        device = record.device or ""
        lease, holder = self._lease(fence, device or "-")
        out = cast(
            "int",
            self._finish(
                keys=[
                    *self.k.run_and_steps(record.id),
                    self.k.device(device),
                    self.k.batch_of(record.batch),
                    self.k.wake,
                    lease,
                    self.k.running,
                    self.k.pictures(record.id),
                ],
                args=[
                    token,
                    result.status.value,
                    result.model_dump_json(),
                    result.reason[:500],
                    repr(time.time()),
                    retention_s,
                    failure.value,
                    quarantine_after,
                    record.id,
                    holder,
                    *row_args(rows),
                ],
            ),
        )
        check_fence(out, fence, f"finishing run {record.id}")
        return bool(out)

    def hand_back(self, record: RunRecord, device_id: str, token: str, *, holder: str = "") -> bool:
        """Give a run this worker can no longer drive back to pending: the one it claimed with
        `token`, or ('' token) one reserved for `device_id` it had not claimed, or (with
        `holder`) one running on `device_id` under that lease holder, whose claim died with a
        pool child of this worker process. False when the run moved on meanwhile (claimed
        again, ended, cancelled, gone)."""
        return bool(
            self._hand_back(
                keys=[
                    self.k.run(record.id),
                    self.k.device(device_id),
                    self.k.pending,
                    self.k.reserved,
                    self.k.wake,
                    self.k.running,
                ],
                args=[
                    token,
                    device_id,
                    record.id,
                    pending_score(record.priority, record.submitted_at),
                    holder,
                ],
            )
        )
