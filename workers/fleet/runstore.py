"""The worker's side of the store: claim a run, write its steps, finish it, and keep the
device's registration and heartbeat lease.

Every write that must be all-or-nothing is one Lua script, so a worker killed at any point
leaves either the old state or the new one, never half of each. Writes to a run are fenced by
the claim token: a zombie execution (its message redelivered elsewhere) cannot overwrite.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import cast

import redis

from workers.core.errors import GoalfleetError
from workers.core.model import RunResult, StepRow
from workers.core.records import DeviceInfo, RunRecord
from workers.fleet.keys import Keys

PRIORITY_SPAN = 10**13
"""Pending score = priority * PRIORITY_SPAN + submit time in ms: priority first (0 highest),
then first come, first served."""


def pending_score(priority: int, submitted_at: float) -> float:
    return priority * PRIORITY_SPAN + int(submitted_at * 1000)


class ClaimLostError(GoalfleetError):
    """This execution no longer owns the run (it was redelivered, cancelled or finished)."""

    code = "CLAIM_LOST"


class DeviceTakenError(GoalfleetError):
    """Another live worker holds this device's lease."""

    code = "DEVICE_TAKEN"


class ClaimKind(StrEnum):
    CLAIMED = "claimed"  # this execution owns the run now (attempt counted)
    EXHAUSTED = "exhausted"  # redelivered past the attempt cap: finish it errored
    TERMINAL = "terminal"  # the run already ended (a duplicate or a cancelled queued run)
    ELSEWHERE = "elsewhere"  # the run was re-dispatched to another device
    MISSING = "missing"  # no such run (expired, or never written)


class Failure(StrEnum):
    """How a finished run counts towards its device's health."""

    NONE = "none"  # done: resets both counters
    INFRA = "infra"  # errored: device, model transport, worker loss
    DECISION = "decision"  # blocked, escalated, max-steps: the device worked
    NEUTRAL = "neutral"  # cancelled, or a configuration error: counts for nothing


@dataclass(frozen=True)
class Claim:
    kind: ClaimKind
    attempt: int = 0
    token: str = ""


_CLAIM = """
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
if attempt > tonumber(ARGV[3]) then return {'exhausted', tostring(attempt)} end
return {'claimed', tostring(attempt)}
"""

_STEP = """
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
"""

# KEYS: run, steps, device, batch, wake
# ARGV: token, status, result, reason, now, retention, failure, quarantine_after, run_id
_FINISH = """
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3], 'reason', ARGV[4],
           'finished_at', ARGV[5], 'claim', '')
local keep = tonumber(ARGV[6])
if keep > 0 then
  redis.call('EXPIRE', KEYS[1], keep)
  redis.call('EXPIRE', KEYS[2], keep)
end
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
if KEYS[4] ~= '' and redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('HINCRBY', KEYS[4], 'n:' .. ARGV[2], 1)
  redis.call('HINCRBY', KEYS[4], 'finished', 1)
end
redis.call('RPUSH', KEYS[5], ARGV[9])
redis.call('LTRIM', KEYS[5], -100, -1)
return 1
"""

# The lease holds a per-process token (`workers.fleet.keys.lease_holder`), never the worker name,
# which every worker of a device shares: register refuses a live lease with another holder;
# renew and deregister act only for the holder.
# KEYS: lease, device, devices, wake   ARGV: holder, lease_ms, info, now, device_id
_REGISTER = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'info', ARGV[3], 'worker', ARGV[1], 'registered_at', ARGV[4])
redis.call('PERSIST', KEYS[2])
redis.call('SADD', KEYS[3], ARGV[5])
redis.call('RPUSH', KEYS[4], ARGV[5])
return ''
"""

# KEYS: lease, wake, device   ARGV: holder, lease_ms
# A lapsed lease (a long pause) is taken back only if no other worker registered since.
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
if not holder and redis.call('HGET', KEYS[3], 'worker') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if not holder then redis.call('RPUSH', KEYS[2], 'lease') end
return 1
"""

# KEYS: lease, device, devices, run, pending, reserved, wake
# ARGV: holder, device_id, keep, run_id ('' when the device is free), pending score
# A run reserved for this device but not claimed yet (its message may sit in the device's
# queue, or was never taken because the worker was shutting down) goes back to pending with
# its own score, so it is dispatched elsewhere (or to this device when it returns); the stale
# message is skipped by the claim (the run moved). -1: the device's run changed, read again.
_DEREGISTER = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local r = redis.call('HGET', KEYS[2], 'run') or ''
if r ~= ARGV[4] then return -1 end
if r ~= '' and redis.call('HGET', KEYS[4], 'status') == 'queued'
   and redis.call('HGET', KEYS[4], 'device') == ARGV[2] then
  redis.call('HSET', KEYS[4], 'device', '', 'dispatched_at', '')
  redis.call('HSET', KEYS[2], 'run', '')
  redis.call('ZADD', KEYS[5], ARGV[5], r)
  redis.call('ZREM', KEYS[6], r)
  redis.call('RPUSH', KEYS[7], r)
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[2])
local keep = tonumber(ARGV[3])
if keep > 0 then redis.call('EXPIRE', KEYS[2], keep) end
return 1
"""


class RunStore:
    """Worker-side operations on the shared store. Thread-safe (redis-py pools connections)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.r = client
        self.k = keys
        self._claim = client.register_script(_CLAIM)
        self._step = client.register_script(_STEP)
        self._finish = client.register_script(_FINISH)
        self._register = client.register_script(_REGISTER)
        self._renew = client.register_script(_RENEW)
        self._deregister = client.register_script(_DEREGISTER)

    # -- runs -------------------------------------------------------------------------------

    def load(self, run_id: str) -> RunRecord | None:
        raw = cast("dict[str, str]", self.r.hgetall(self.k.run(run_id)))
        return RunRecord.from_hash(raw) if raw else None

    def claim(self, run_id: str, device_id: str, worker: str, *, cap: int) -> Claim:
        token = uuid.uuid4().hex
        kind, attempt = cast(
            "list[str]",
            self._claim(
                keys=[
                    self.k.run(run_id),
                    self.k.steps(run_id),
                    self.k.device(device_id),
                    self.k.reserved,
                ],
                args=[device_id, worker, cap, token, repr(time.time()), run_id],
            ),
        )
        return Claim(kind=ClaimKind(kind), attempt=int(attempt), token=token)

    def write_step(self, run_id: str, token: str, row: StepRow) -> None:
        """Upsert one step row on (run_id, index), as it happens, so clients can tail it."""
        ok = self._step(
            keys=[self.k.run(run_id), self.k.steps(run_id)],
            args=[token, row.index, row.model_dump_json()],
        )
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
    ) -> bool:
        """Write the final result, free the device, count the batch: all or nothing."""
        device = record.device or ""
        return bool(
            self._finish(
                keys=[
                    self.k.run(record.id),
                    self.k.steps(record.id),
                    self.k.device(device),
                    self.k.batch(record.batch) if record.batch else "",
                    self.k.wake,
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
                ],
            )
        )

    # -- devices ----------------------------------------------------------------------------

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

    def renew(self, device_id: str, holder: str, *, lease_s: float) -> bool:
        """Extend the lease; False when another holder has it (or registered since it lapsed)."""
        return bool(
            self._renew(
                keys=[self.k.lease(device_id), self.k.wake, self.k.device(device_id)],
                args=[holder, int(lease_s * 1000)],
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
                        ],
                        args=[holder, device_id, keep_s, run_id, score],
                    ),
                )
            )
            if out >= 0:
                return bool(out)
        return False

    def quarantined(self, device_id: str) -> bool:
        return self.r.hget(self.k.device(device_id), "quarantined") == "1"

    def recover(self, device_id: str) -> None:
        """Lift a quarantine after a successful probe; the scheduler is woken to dispatch."""
        with self.r.pipeline(transaction=True) as p:
            p.hset(
                self.k.device(device_id),
                mapping={"quarantined": "0", "quarantine_reason": "", "infra_failures": "0"},
            )
            p.rpush(self.k.wake, device_id)
            p.execute()
