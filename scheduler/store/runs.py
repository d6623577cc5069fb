"""The scheduler's side of the store: submit runs and batches (with idempotency), reserve a
device for a pending run, cancel, and read runs, steps and batches.

The key layout is `workers.fleet.keys`; the worker's side (claim, steps, finish) is
`workers.fleet.runstore`; devices (registration, leases, quarantine, their state) are
`workers.fleet.registry`, reached here as `FleetStore.registry`. Reserve, unreserve, cancel and
stray release also set or clear a device's `run` field, in the same script as the run's write.

Every write that must be all-or-nothing is one MULTI/EXEC or one Lua script, so a crash at any
point leaves nothing half-written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, cast

import redis
from redis.client import Pipeline

from scheduler.store.enqueue import Message
from workers.core.model import RunResult, RunStatus, StepRow
from workers.core.records import BatchRecord, RunRecord
from workers.fleet.keys import Keys
from workers.fleet.registry import DeviceRegistry
from workers.fleet.runstore import Failure, RunStore, ends_a_run, pending_score
from workers.fleet.scripts import RedisStore, Script

# KEYS: run, device, lease, pending, reserved   ARGV: run_id, device_id, now
_RESERVE = """
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then return 0 end
local d = redis.call('HGET', KEYS[1], 'device')
if d and d ~= '' then return 0 end
if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then return 0 end
local r = redis.call('HGET', KEYS[2], 'run')
if r and r ~= '' then return 0 end
if redis.call('HGET', KEYS[2], 'quarantined') == '1' then return 0 end
if redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'device', ARGV[2], 'dispatched_at', ARGV[3])
redis.call('HSET', KEYS[2], 'run', ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])
return 1
"""

# KEYS: run, pending, idem, device, lease, reserved, wake, the device's queue
# ARGV: run_id, pending score, max pending (0: no limit), idem value ('': no key), idem ttl
#       (0: none), device to try ('': none), now, the run's broker message ('': none), then
#       the run's hash as field/value pairs
# One run's submit in one round trip: an idempotency key already used answers what it names
# and writes nothing; a full backlog writes nothing; else the run is written and, when the
# device the caller's view picked is free, live and unquarantined, reserved for it (the
# `_RESERVE` checks; a new run needs none of the run-side ones) and its message pushed onto
# the device's queue, as kombu pushes one; else pending, with a wake-up for the scheduler.
_SUBMIT_ONE = """
if ARGV[4] ~= '' then
  local e = redis.call('GET', KEYS[3])
  if e then return {'existing', e} end
end
local cap = tonumber(ARGV[3])
if cap > 0 and redis.call('ZCARD', KEYS[2]) >= cap then return {'full'} end
if ARGV[4] ~= '' then
  if tonumber(ARGV[5]) > 0 then
    redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5])
  else
    redis.call('SET', KEYS[3], ARGV[4])
  end
end
redis.call('HSET', KEYS[1], unpack(ARGV, 9))
if ARGV[6] ~= '' then
  local r = redis.call('HGET', KEYS[4], 'run')
  if (not r or r == '') and redis.call('HGET', KEYS[4], 'quarantined') ~= '1'
     and redis.call('EXISTS', KEYS[5]) == 1 then
    redis.call('HSET', KEYS[1], 'device', ARGV[6], 'dispatched_at', ARGV[7])
    redis.call('HSET', KEYS[4], 'run', ARGV[1])
    redis.call('ZADD', KEYS[6], ARGV[7], ARGV[1])
    if ARGV[8] ~= '' then redis.call('LPUSH', KEYS[8], ARGV[8]) end
    return {'reserved'}
  end
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('RPUSH', KEYS[7], 'submit')
return {'pending'}
"""

# KEYS: running   ARGV: run_id, claim time as read
_FORGET_RUNNING = """
local t = redis.call('ZSCORE', KEYS[1], ARGV[1])
if t and tonumber(t) == tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"""

# KEYS: run, device, pending, reserved   ARGV: run_id, device_id, score
_UNRESERVE = """
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then return 0 end
if redis.call('HGET', KEYS[1], 'device') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'device', '', 'dispatched_at', '')
if redis.call('HGET', KEYS[2], 'run') == ARGV[1] then redis.call('HSET', KEYS[2], 'run', '') end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
"""

# KEYS: run, device, pending, reserved, devices   ARGV: run_id, device_id, score
# A reservation no registered device holds (the device left the set without handing it back,
# or its record is gone) goes back to pending; an index entry for a run no longer reserved
# (claimed, ended, re-pended) is dropped.
_RELEASE_STRAY = """
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then
  redis.call('ZREM', KEYS[4], ARGV[1])
  return 0
end
local d = redis.call('HGET', KEYS[1], 'device')
if not d or d == '' then
  redis.call('ZREM', KEYS[4], ARGV[1])
  return 0
end
if d ~= ARGV[2] then return 0 end
if redis.call('SISMEMBER', KEYS[5], d) == 1 and redis.call('HGET', KEYS[2], 'run') == ARGV[1]
then return 0 end
redis.call('HSET', KEYS[1], 'device', '', 'dispatched_at', '')
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
"""

# KEYS: run, steps, device, pending, batch, wake
# ARGV: run_id, device_id, result, now, retention
_CANCEL = ends_a_run(
    """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return 'missing' end
if st == 'running' then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  return 'requested'
end
if st ~= 'queued' then return 'terminal:' .. st end
local d = redis.call('HGET', KEYS[1], 'device') or ''
if d ~= ARGV[2] then return 'retry' end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'result', ARGV[3],
           'reason', 'cancelled by the caller', 'finished_at', ARGV[4], 'cancel', '1')
redis.call('ZREM', KEYS[4], ARGV[1])
if d ~= '' and redis.call('HGET', KEYS[3], 'run') == ARGV[1] then
  redis.call('HSET', KEYS[3], 'run', '')
  redis.call('RPUSH', KEYS[6], ARGV[1])
end
run_ended(KEYS[1], KEYS[2], KEYS[5], 'cancelled', ARGV[5])
return 'cancelled'
"""
)


# KEYS: run, steps, pending, batch   ARGV: run_id, result, now, retention, reason
# Only a run still pending with no device (a run being placed right now is left alone).
_EXPIRE = ends_a_run(
    """
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then return 0 end
local d = redis.call('HGET', KEYS[1], 'device') or ''
if d ~= '' then return 0 end
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'status', 'unplaceable', 'result', ARGV[2], 'reason', ARGV[5],
           'finished_at', ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[1])
run_ended(KEYS[1], KEYS[2], KEYS[4], 'unplaceable', ARGV[4])
return 1
"""
)


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


class FleetStore(RedisStore):
    _submit_one = Script(_SUBMIT_ONE)
    _reserve = Script(_RESERVE)
    _unreserve = Script(_UNRESERVE)
    _cancel = Script(_CANCEL)
    _release_stray = Script(_RELEASE_STRAY)
    _forget_running = Script(_FORGET_RUNNING)
    _expire = Script(_EXPIRE)

    def __init__(self, client: redis.Redis, keys: Keys, *, retention_s: int) -> None:
        super().__init__(client, keys)
        self.retention_s = retention_s
        self.registry = DeviceRegistry(client, keys)
        """Device registration and state: the one owner of those keys."""
        self.runs = RunStore(client, keys)
        """The worker's side of runs (load, finish), for the sweeps' and reads' use."""

    def ping(self) -> None:
        self.r.ping()

    # -- submit ----------------------------------------------------------------------------

    def create(
        self,
        runs: list[RunRecord],
        *,
        batch: BatchRecord | None = None,
        idem: Idempotency | None = None,
    ) -> str | None:
        """Write runs (and their batch) as pending, all or nothing. With an idempotency key
        already used, write nothing and return what it names (`run:<id>` / `batch:<id>`,
        then `|` and the body hash)."""
        ref = f"batch:{batch.id}" if batch else f"run:{runs[0].id}"
        idem_key = self.k.idem(idem.key) if idem is not None else None
        existing: str | None = None

        def write(p: Pipeline) -> None:
            """One attempt; `transaction` runs it again when the watched key changed."""
            nonlocal existing
            existing = cast("str | None", p.get(idem_key)) if idem_key is not None else None
            if existing is not None:
                p.reset()  # the key is taken: unwatch and write nothing
                return
            p.multi()
            if idem is not None and idem_key is not None:
                p.set(idem_key, f"{ref}|{idem.body_hash}", ex=self.retention_s or None)
            for run in runs:
                fields = run.to_hash()
                if batch is not None:
                    fields["request"] = ""  # the batch holds it, once (`request_on_batch`)
                p.hset(self.k.run(run.id), mapping=fields)  # type: ignore[arg-type]
                p.zadd(self.k.pending, {run.id: pending_score(run.priority, run.submitted_at)})
            if batch is not None:
                p.hset(
                    self.k.batch(batch.id),
                    mapping={
                        "id": batch.id,
                        "total": batch.total,
                        "finished": 0,
                        "created_at": repr(batch.created_at),
                        "goal": batch.goal,
                        "request": runs[0].request.model_dump_json(),
                    },
                )
                p.rpush(self.k.batch_runs(batch.id), *[r.id for r in runs])
                if self.retention_s:
                    # a batch outlives its runs by a day so its counts stay readable
                    keep = self.retention_s + 86400
                    p.expire(self.k.batch(batch.id), keep)
                    p.expire(self.k.batch_runs(batch.id), keep)

        # WATCH the idempotency key, read it, MULTI/EXEC the writes; redis-py retries the whole
        # of `write` on a WatchError (another submit took the key in between)
        self.r.transaction(write, *([idem_key] if idem_key is not None else []))
        return existing

    def submit_one(
        self,
        run: RunRecord,
        *,
        idem: Idempotency | None,
        max_pending: int,
        device_id: str | None,
        message: Message | None = None,
    ) -> Submitted:
        """Write one run, all or nothing, in one round trip (`_SUBMIT_ONE`): refused when
        `max_pending` runs are pending already (0: no limit), a replay when the idempotency
        key was used, else pending or, when `device_id` is free, reserved for it and, with
        `message` (the run's broker message for that device), sent: pushed onto its queue in
        the same script, so a reservation is never left without its message."""
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
                    message.key if message is not None else self.k.queue("-"),
                ],
                args=[
                    run.id,
                    pending_score(run.priority, run.submitted_at),
                    max_pending,
                    f"run:{run.id}|{idem.body_hash}" if idem is not None else "",
                    self.retention_s if idem is not None else 0,
                    device_id or "",
                    repr(now),
                    message.payload if message is not None else "",
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

    def pending_count(self) -> int:
        return int(self.r.zcard(self.k.pending))

    def pending_ids(self, limit: int = 1000, *, offset: int = 0) -> list[str]:
        """Pending run ids in dispatch order (priority, then submit time)."""
        return cast("list[str]", self.r.zrange(self.k.pending, offset, offset + limit - 1))

    # -- dispatch --------------------------------------------------------------------------

    def reserve(self, run_id: str, device_id: str) -> float | None:
        """Atomically give a pending run to an idle, live, unquarantined device; the
        `dispatched_at` it wrote, or None when it did not."""
        now = time.time()
        done = bool(
            self._reserve(
                keys=[
                    self.k.run(run_id),
                    self.k.device(device_id),
                    self.k.lease(device_id),
                    self.k.pending,
                    self.k.reserved,
                ],
                args=[run_id, device_id, repr(now)],
            )
        )
        return now if done else None

    def unreserve(self, run: RunRecord, device_id: str) -> bool:
        """Undo `reserve` when the message could not be sent: the run is pending again."""
        return bool(
            self._unreserve(
                keys=[
                    self.k.run(run.id),
                    self.k.device(device_id),
                    self.k.pending,
                    self.k.reserved,
                ],
                args=[run.id, device_id, pending_score(run.priority, run.submitted_at)],
            )
        )

    def reservations(self, *, before: float, limit: int = 1000) -> list[str]:
        """Runs reserved (not yet claimed) before `before`, oldest first."""
        return cast(
            "list[str]",
            self.r.zrangebyscore(self.k.reserved, "-inf", before, start=0, num=limit),
        )

    def running_since(self, *, before: float, limit: int = 1000) -> list[tuple[str, float]]:
        """(run id, claim time) of runs claimed before `before`, oldest first: the overdue
        candidates (an entry can be stale: the run ended another way, or went back to
        pending)."""
        return cast(
            "list[tuple[str, float]]",
            self.r.zrangebyscore(
                self.k.running, "-inf", before, start=0, num=limit, withscores=True
            ),
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
                ],
                args=[run.id, device_id, pending_score(run.priority, run.submitted_at)],
            )
        )

    def touch_dispatch(self, run_id: str) -> None:
        """A reservation's message was sent again: its time (and its index score) is now."""
        now = time.time()
        with self.r.pipeline(transaction=True) as p:
            p.hset(self.k.run(run_id), "dispatched_at", repr(now))
            p.zadd(self.k.reserved, {run_id: now}, xx=True)
            p.execute()

    def end_overdue(self, run: RunRecord, why: str) -> bool:
        """End a run its worker can no longer finish (fenced by the current claim token)."""
        token = cast("str | None", self.r.hget(self.k.run(run.id), "claim"))
        if not token:
            return False
        result = RunResult(
            status=RunStatus.ERRORED,
            reason=f"{why}; the worker was killed at its hard time limit or lost the run",
            goal=run.request.goal,
            steps=tuple(self.steps(run.id)),  # the rows its last attempt wrote
            run_id=run.id,
            device_id=run.device,
            attempt=run.attempt,
        )
        return self.runs.finish(
            run,
            token,
            result,
            failure=Failure.INFRA,
            quarantine_after=10**6,
            retention_s=self.retention_s,
        )

    def wait_wake(self, timeout_s: float) -> list[str]:
        """Block until a device frees (or `timeout_s`); drain the wake list and return what it
        named (ended runs' ids, recovered devices' ids, "submit"); [] on a timeout."""
        got = cast(
            "tuple[str, str] | None",
            self.r.blpop([self.k.wake], timeout=min(max(timeout_s, 0.01), 4.0)),
        )
        if got is None:
            return []
        with self.r.pipeline(transaction=True) as p:
            p.lrange(self.k.wake, 0, -1)
            p.delete(self.k.wake)
            rest = cast("list[str]", p.execute()[0])
        return [got[1], *rest]

    def wake(self) -> None:
        self.r.rpush(self.k.wake, "submit")

    # -- cancel ----------------------------------------------------------------------------

    def cancel(self, run_id: str) -> str:
        """`cancelled` (it was queued), `requested` (running: the worker stops between steps),
        `terminal:<status>`, or `missing`."""
        for _ in range(20):
            run = self.load(run_id)
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

    def expire_unplaceable(self, run_id: str, *, after_s: float) -> bool:
        """End a pending, unreserved run `unplaceable` (the caller found that no registered
        device matches it); False if it was placed, cancelled or ended meanwhile."""
        run = self.load(run_id)
        if run is None:
            return False
        reason = f"no registered device can take it (waited {after_s:g} s)"
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

    # -- reads -----------------------------------------------------------------------------

    def load(self, run_id: str) -> RunRecord | None:
        return self.runs.load(run_id)

    def load_many(self, run_ids: list[str]) -> list[RunRecord]:
        with self.r.pipeline(transaction=False) as p:
            for rid in run_ids:
                p.hgetall(self.k.run(rid))
            raws = cast("list[dict[str, str]]", p.execute())
        shared = sorted({b for raw in raws if (b := RunRecord.request_on_batch(raw))})
        if shared:  # a batch's runs: their request is stored once, on the batch
            with self.r.pipeline(transaction=False) as p:
                for batch_id in shared:
                    p.hget(self.k.batch(batch_id), "request")
                requests = dict(zip(shared, cast("list[str | None]", p.execute()), strict=True))
            for raw in raws:
                if b := RunRecord.request_on_batch(raw):
                    raw["request"] = requests[b] or ""
        return [RunRecord.from_hash(raw) for raw in raws if raw]

    def steps(self, run_id: str, *, after: int = 0) -> list[StepRow]:
        raw = cast("dict[str, str]", self.r.hgetall(self.k.steps(run_id)))
        rows = [StepRow.model_validate_json(v) for k, v in raw.items() if int(k) > after]
        return sorted(rows, key=lambda r: r.index)

    def device_ids(self) -> list[str]:
        """`registry.device_ids()`, kept for `scheduler.api.app`'s health check until it reads the
        registry itself."""
        return self.registry.device_ids()

    def batch(self, batch_id: str) -> BatchRecord | None:
        with self.r.pipeline(transaction=False) as p:
            p.hgetall(self.k.batch(batch_id))
            p.lrange(self.k.batch_runs(batch_id), 0, -1)
            raw, runs = p.execute()
        if not raw:
            return None
        return BatchRecord.from_hash(cast("dict[str, str]", raw), cast("list[str]", runs))

    def key_count(self) -> int:
        """How many keys this fleet has (tests: nothing written on a rejected request)."""
        return sum(1 for _ in self.r.scan_iter(match=self.k.pattern(), count=1000))
