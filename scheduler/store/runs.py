"""The scheduler's store: every transition of `workers.fleet.state.queue.RunQueue` (submit,
reserve, cancel, ...) and the reads and sweeps the API and the dispatcher need: runs, steps,
batches, the reserved and running indexes, the wake list, and ending an overdue run.

The key layout is `workers.fleet.keys`; the state machine is `workers.fleet.state`; devices
(registration, leases, quarantine, their state) are reached here as `FleetStore.registry`.
"""

from __future__ import annotations

import json
from typing import NamedTuple, cast

import redis

from scheduler.store.listing import RunList
from workers.core.model import RunResult, RunStatus, StepRow
from workers.core.records import BatchRecord, RunRecord
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.fleet.state.queue import RunQueue
from workers.fleet.state.scripts import Script
from workers.fleet.state.states import Failure


class PendingFacts(NamedTuple):
    """What placement needs of a run (`scheduler.dispatch.placement`), read without loading
    its record: where it may go (its `target`, its selector's JSON as stored), when it was
    submitted, and how long it may wait for a device that is down."""

    run_id: str
    target: str | None
    selector: str | None
    submitted_at: float
    device_wait_s: float | None


_FACTS = ("target", "selector", "submitted_at", "request", "batch")


class FleetStore(RunQueue):
    _pending_page = Script("pending_page")

    def __init__(self, client: redis.Redis, keys: Keys, *, retention_s: int) -> None:
        super().__init__(client, keys, retention_s=retention_s)
        self.registry = DeviceRegistry(client, keys)
        """Device registration and state: the one owner of those keys."""
        self.listing = RunList(client, keys, self.load_many)
        """The run list (`GET /v1/runs`)."""

    def ping(self) -> None:
        self.r.ping()

    def pending_count(self) -> int:
        return int(self.r.zcard(self.k.pending))

    def pending_ids(self, limit: int = 1000) -> list[str]:
        """The first pending run ids in dispatch order (priority, then submit time); a pass
        reads on with `pending_page`."""
        return cast("list[str]", self.r.zrange(self.k.pending, 0, limit - 1))

    def pending_page(
        self, limit: int, *, after: tuple[str, float] | None
    ) -> list[tuple[str, float]]:
        """(run id, score) of up to `limit` pending runs in dispatch order: the first ones, or
        those after the entry `after` (a run id and its score, as a page returned it), whether
        or not that run is still pending (`lua/pending_page.lua`)."""
        if after is None:
            got = self.r.zrange(self.k.pending, 0, limit - 1, withscores=True)
        else:
            flat = self._pending_page(keys=[self.k.pending], args=[limit, repr(after[1]), after[0]])
            got = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
        return cast("list[tuple[str, float]]", got)

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

    def pending_facts(self, run_ids: list[str]) -> list[PendingFacts]:
        """`PendingFacts` of each run that exists, in order: one round trip (two when some
        are a batch's, whose request is stored once, on the batch). Of the request only its
        `device_wait_s` is read, from the JSON, without validating the whole request."""
        with self.r.pipeline(transaction=False) as p:
            for rid in run_ids:
                p.hmget(self.k.run(rid), _FACTS)
            rows = cast("list[list[str | None]]", p.execute())
        batches = sorted({b for *_, req, b in rows if b and not req})
        shared: dict[str, str | None] = {}
        if batches:
            with self.r.pipeline(transaction=False) as p:
                for batch_id in batches:
                    p.hget(self.k.batch(batch_id), "request")
                shared = dict(zip(batches, cast("list[str | None]", p.execute()), strict=True))
        out = []
        for rid, (target, selector, at, request, batch) in zip(run_ids, rows, strict=True):
            if at is None:
                continue  # gone (expired or deleted) since the index was read
            raw = request or shared.get(batch or "") or "{}"
            wait = json.loads(raw).get("device_wait_s")
            out.append(PendingFacts(rid, target or None, selector or None, float(at), wait))
        return out

    def owners(self, run_ids: list[str]) -> dict[str, str | None]:
        """Who submitted each run (None: nobody recorded, or the run is gone): one round trip."""
        with self.r.pipeline(transaction=False) as p:
            for rid in run_ids:
                p.hget(self.k.run(rid), "owner")
            got = cast("list[str | None]", p.execute())
        return {rid: owner or None for rid, owner in zip(run_ids, got, strict=True)}

    def steps(self, run_id: str, *, after: int = 0) -> list[StepRow]:
        raw = cast("dict[str, str]", self.r.hgetall(self.k.steps(run_id)))
        rows = [StepRow.model_validate_json(v) for k, v in raw.items() if int(k) > after]
        return sorted(rows, key=lambda r: r.index)

    def showed(self, run_id: str, artifact: str) -> bool:
        """Whether a step row of the run ever named the picture `artifact` (rows written anew
        when the run was claimed again included: `Keys.pictures`)."""
        return bool(self.r.sismember(self.k.pictures(run_id), artifact))

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
