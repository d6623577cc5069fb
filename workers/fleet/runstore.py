"""The worker's side of the store: claim a run, write its steps, finish it. The device's
registration and heartbeat lease are `workers.fleet.registry`.

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
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, cast

from workers.core.errors import GoalfleetError
from workers.core.model import RunResult, StepRow
from workers.core.records import RunRecord
from workers.fleet.fence import Fence, LeaseLostError
from workers.fleet.scripts import RedisStore, Script

PRIORITY_SPAN = 10**13
"""Pending score = priority * PRIORITY_SPAN + submit time in ms: priority first (0 highest),
then first come, first served."""


def pending_score(priority: int, submitted_at: float) -> float:
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


class Failure(StrEnum):
    """How a finished run counts towards its device's health."""

    NONE = "none"  # done: resets both counters
    INFRA = "infra"  # errored on the device: its error, a soft time limit, a worker lost on it
    DECISION = "decision"  # blocked, escalated, max-steps: the device worked
    NEUTRAL = "neutral"  # cancelled, or a configuration error: counts for nothing


@dataclass(frozen=True)
class Claim:
    kind: ClaimKind
    attempt: int = 0
    token: str = ""
    record: RunRecord | None = None
    """The run as the claim left it (running on this device, its attempt, worker and start
    time), read by the claim script itself: CLAIMED and EXHAUSTED only."""


LEASE_LUA = """
local function lease_lost(lease, holder)
  if holder == '' then return 0 end
  local h = redis.call('GET', lease)
  if h == holder then return 0 end
  if h then return -1 end
  return -2
end
"""
"""The lease check of every fenced script: 0 while `holder` ('' for an unfenced caller) holds
`lease`; -1 another holder has it; -2 nobody does (it lapsed, or Redis lost it)."""

TAKEN, LAPSED = -1, -2


def fenced_script(body: str) -> str:
    """A script fenced by the worker's lease: `body`, which calls `lease_lost(...)`."""
    return LEASE_LUA + body


def _fenced(out: object, fence: Fence | None, what: str) -> None:
    """Raise `LeaseLostError` for a fenced script's -1 or -2."""
    if fence is None or out not in (TAKEN, LAPSED, str(TAKEN), str(LAPSED)):
        return
    taken = out in (TAKEN, str(TAKEN))
    why = "another worker holds" if taken else "nobody holds (it lapsed or vanished)"
    raise LeaseLostError(
        f"{what} refused: {why} the lease of device {fence.device_id!r}", taken=taken
    )


# KEYS: run, steps, device, reserved, lease, running
# ARGV: device_id, worker, cap, token, now, run_id, holder
_CLAIM = fenced_script("""
local lost = lease_lost(KEYS[5], ARGV[7])
if lost ~= 0 then return {'lease', tostring(lost)} end
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'missing', '0'} end
local attempt = tonumber(redis.call('HGET', KEYS[1], 'attempt') or '0') or 0
if st ~= 'queued' and st ~= 'running' then return {'terminal', tostring(attempt)} end
if redis.call('HGET', KEYS[1], 'device') ~= ARGV[1] then return {'elsewhere', tostring(attempt)} end
attempt = attempt + 1
redis.call('HSET', KEYS[1], 'status', 'running', 'worker', ARGV[2], 'attempt', attempt,
           'claim', ARGV[4], 'started_at', ARGV[5])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[3], 'run', ARGV[6])
redis.call('ZREM', KEYS[4], ARGV[6])
redis.call('ZADD', KEYS[6], ARGV[5], ARGV[6])
local kind = 'claimed'
if attempt > tonumber(ARGV[3]) then kind = 'exhausted' end
return {kind, tostring(attempt), redis.call('HGETALL', KEYS[1])}
""")

# KEYS: run, steps, lease   ARGV: token, index, row, holder
_STEP = fenced_script("""
local lost = lease_lost(KEYS[3], ARGV[4])
if lost ~= 0 then return lost end
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
""")

RUN_ENDED_LUA = """
local function run_ended(run, steps, batch, status, keep)
  if batch ~= '' and redis.call('EXISTS', batch) == 1 then
    redis.call('HINCRBY', batch, 'n:' .. status, 1)
    redis.call('HINCRBY', batch, 'finished', 1)
  end
  keep = tonumber(keep)
  if keep > 0 then
    redis.call('EXPIRE', run, keep)
    redis.call('EXPIRE', steps, keep)
    -- the batch holds its runs' request: it outlives each of them
    if batch ~= '' and redis.call('TTL', batch) < keep then redis.call('EXPIRE', batch, keep) end
  end
end
"""
"""The Lua function every script that ends a run calls (finish, cancel, a question's end):
the run counts once in its batch (`batch` '' when it has none), and the run and its step rows
are kept `keep` seconds (0: for good)."""


def ends_a_run(body: str) -> str:
    """A script that ends a run: `body`, which calls `run_ended(...)` (`RUN_ENDED_LUA`)."""
    return RUN_ENDED_LUA + body


# KEYS: run, steps, device, batch, wake, lease, running
# ARGV: token, status, result, reason, now, retention, failure, quarantine_after, run_id, holder
_FINISH = fenced_script(
    ends_a_run(
        """
local lost = lease_lost(KEYS[6], ARGV[10])
if lost ~= 0 then return lost end
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3], 'reason', ARGV[4],
           'finished_at', ARGV[5], 'claim', '')
run_ended(KEYS[1], KEYS[2], KEYS[4], ARGV[2], ARGV[6])
redis.call('ZREM', KEYS[7], ARGV[9])
if redis.call('HGET', KEYS[3], 'run') == ARGV[9] then redis.call('HSET', KEYS[3], 'run', '') end
redis.call('HINCRBY', KEYS[3], 'runs_total', 1)
local f = ARGV[7]
if f == 'infra' then
  local n = redis.call('HINCRBY', KEYS[3], 'infra_failures', 1)
  if n >= tonumber(ARGV[8]) then
    redis.call('HSET', KEYS[3], 'quarantined', '1', 'quarantine_reason',
               n .. ' infrastructure failures in a row; last: ' .. ARGV[4])
  end
elseif f == 'none' then
  redis.call('HSET', KEYS[3], 'infra_failures', 0, 'decision_failures', 0)
elseif f == 'decision' then
  redis.call('HSET', KEYS[3], 'infra_failures', 0)
  redis.call('HINCRBY', KEYS[3], 'decision_failures', 1)
end
redis.call('RPUSH', KEYS[5], ARGV[9])
redis.call('LTRIM', KEYS[5], -100, -1)
return 1
"""
    )
)

# KEYS: run, device, pending, reserved, wake   ARGV: token, device_id, run_id, score
# A run claimed with `token` (or, with token '', reserved for this device and not claimed yet)
# goes back to pending with its own score; its attempt stays counted (once), its device's
# failure counters are not touched, and the scheduler is woken to dispatch it again.
_HAND_BACK = """
local st = redis.call('HGET', KEYS[1], 'status')
if ARGV[1] ~= '' then
  if st ~= 'running' or redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
elseif st ~= 'queued' or redis.call('HGET', KEYS[1], 'device') ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'queued', 'device', '', 'dispatched_at', '', 'claim', '')
if redis.call('HGET', KEYS[2], 'run') == ARGV[3] then redis.call('HSET', KEYS[2], 'run', '') end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[3])
redis.call('RPUSH', KEYS[5], ARGV[3])
return 1
"""


class RunStore(RedisStore):
    """Worker-side operations on the shared store. Thread-safe (redis-py pools connections)."""

    _claim = Script(_CLAIM)
    _step = Script(_STEP)
    _finish = Script(_FINISH)
    _hand_back = Script(_HAND_BACK)

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
            raw["request"] = cast("str", self.r.hget(self.k.batch(batch_id), "request") or "")
        return RunRecord.from_hash(raw) if raw else None

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
            _fenced(attempt, fence, f"claiming run {run_id}")
        claim = Claim(kind=ClaimKind(kind), attempt=int(attempt), token=token)
        if claim.kind not in {ClaimKind.CLAIMED, ClaimKind.EXHAUSTED}:
            return claim
        flat = reply[2]  # the run hash as the claim left it, flat field/value pairs
        record = self._record(dict(zip(flat[::2], flat[1::2], strict=True)))
        return replace(claim, record=record)

    def write_step(
        self, run_id: str, token: str, row: StepRow, *, fence: Fence | None = None
    ) -> None:
        """Upsert one step row on (run_id, index), as it happens, so clients can tail it.
        `ClaimLostError` when the claim moved on; `LeaseLostError` when `fence`'s token no
        longer holds the device's lease."""
        lease, holder = self._lease(fence, "-")
        ok = self._step(
            keys=[*self.k.run_and_steps(run_id), lease],
            args=[token, row.index, row.model_dump_json(), holder],
        )
        _fenced(ok, fence, f"step {row.index} of run {run_id}")
        if not ok:
            raise ClaimLostError(f"run {run_id} is no longer claimed by this execution")

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
    ) -> bool:
        """Write the final result, free the device, count the batch: all or nothing. False
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
                ],
            ),
        )
        _fenced(out, fence, f"finishing run {record.id}")
        return bool(out)

    def hand_back(self, record: RunRecord, device_id: str, token: str) -> bool:
        """Give a run this worker can no longer drive back to pending: the one it claimed with
        `token`, or ('' token) one reserved for `device_id` it had not claimed. False when
        the run moved on meanwhile (claimed again, ended, cancelled, gone)."""
        return bool(
            self._hand_back(
                keys=[
                    self.k.run(record.id),
                    self.k.device(device_id),
                    self.k.pending,
                    self.k.reserved,
                    self.k.wake,
                ],
                args=[
                    token,
                    device_id,
                    record.id,
                    pending_score(record.priority, record.submitted_at),
                ],
            )
        )
