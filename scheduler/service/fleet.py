"""The fleet's operations as the API offers them: submit (run, batch), read, cancel, devices.

Validation that needs the store (unknown device, selector matching nothing, backlog full)
happens before anything is written; then one atomic write; then a dispatch attempt. For one
run, the backlog check, the write and the reservation of the device the cached view picked are
one script, one round trip (`FleetStore.submit_one`); only the send to the device follows.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Literal

import structlog

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.dispatch.routing import matching
from scheduler.errors import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    TooManyPendingError,
)
from scheduler.service.requests import BatchSubmit, RunSubmit, SuiteSubmit
from scheduler.store.listing import RunPage, RunQuery
from scheduler.store.runs import FleetStore
from workers.core.model import StepRow
from workers.core.records import BatchRecord, DeviceState, RunRecord, Selector
from workers.fleet.state.queue import Idempotency

log = structlog.stdlib.get_logger("goalfleet.scheduler")
CancelOutcome = Literal["cancelled", "requested"]
IDEMPOTENCY_KEY = r"^[A-Za-z0-9_.:-]{1,128}$"


def new_id() -> str:
    return uuid.uuid4().hex


def _body_hash(body: str) -> str:
    return hashlib.blake2b(body.encode(), digest_size=12).hexdigest()


def _health(device: DeviceState) -> str:
    if not device.alive:
        return ", down"
    return ", quarantined" if device.quarantined else ""


class Fleet:
    def __init__(self, store: FleetStore, dispatcher: Dispatcher, *, max_pending: int) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.max_pending = max_pending

    # -- submit ----------------------------------------------------------------------------

    def submit_run(
        self,
        sub: RunSubmit,
        *,
        idempotency_key: str | None = None,
        schedule: str | None = None,
        owner: str | None = None,
    ) -> tuple[RunRecord, bool]:
        """Returns (the run, whether it was created now). A repeated idempotency key with the
        same body returns the first run; with a different body it is a 409. `owner` (who
        submits it) is written with the run; idempotency keys are each owner's own."""
        self._check_target(sub.device, sub.selector)
        run = RunRecord(
            id=new_id(),
            request=sub.goal_request(),
            target=sub.device,
            selector=sub.selector,
            priority=sub.priority,
            submitted_at=time.time(),
            schedule=schedule,
            owner=owner,
        )
        idem = self._idem(idempotency_key, sub, owner)
        device = self.dispatcher.fast_pick(run)
        out = self.store.submit_one(
            run,
            idem=idem,
            max_pending=self.max_pending,
            device=device.info.id if device is not None else None,
        )
        if out.existing is not None:
            return self._replay_run(out.existing, idem), False
        if out.kind == "full":
            raise self._too_many()
        if device is None or out.dispatched_at is None:
            if device is not None:
                self.dispatcher.refused(device)
            return run, True  # pending; the script woke the scheduler, which places it
        return self.dispatcher.sent_reserved(run, device, out.dispatched_at), True

    def submit_batch(
        self,
        sub: BatchSubmit,
        *,
        idempotency_key: str | None = None,
        schedule: str | None = None,
        owner: str | None = None,
    ) -> tuple[BatchRecord, bool]:
        if sub.count is not None and self.dispatcher.view.has_match(None, sub.selector):
            targets: list[DeviceState] = []  # `count` runs, each placed later: a match will do
        else:  # a fan-out reads afresh; a count batch the cached view has no match for re-reads
            targets = self._batch_targets(sub)
        n = sub.count if sub.count is not None else len(targets)
        self._check_backlog(n)
        now = time.time()
        batch_id = new_id()
        request = sub.goal_request()
        runs = [
            RunRecord(
                id=new_id(),
                request=request,
                target=None if sub.count is not None else targets[i].info.id,
                selector=sub.selector if sub.count is not None else None,
                batch=batch_id,
                priority=sub.priority,
                submitted_at=now,
                schedule=schedule,
                owner=owner,
            )
            for i in range(n)
        ]
        batch = BatchRecord(
            id=batch_id,
            total=n,
            created_at=now,
            goal=request.goal,
            runs=tuple(r.id for r in runs),
            owner=owner,
        )
        idem = self._idem(idempotency_key, sub, owner)
        existing = self.store.create(runs, batch=batch, idem=idem)
        if existing is not None:
            ref = self._replay(existing, idem, "batch")
            found = self.store.batch(ref)
            if found is None:
                raise NotFoundError(f"batch {ref} named by the idempotency key has expired")
            return found, False
        self._dispatch([r.id for r in runs])
        return self.store.batch(batch_id) or batch, True

    def submit_suite(
        self,
        sub: SuiteSubmit,
        *,
        idempotency_key: str | None = None,
        schedule: str | None = None,
        owner: str | None = None,
    ) -> tuple[BatchRecord, bool]:
        """A suite as one batch: each flow's run on every live, healthy device each cell of
        its matrix matches (a device once per flow), its request stored once per flow."""
        now = time.time()
        batch_id = new_id()
        runs: list[RunRecord] = []
        for i, flow in enumerate(sub.flows):
            request = flow.goal_request().model_copy(update={"suite_budget": sub.budget})
            seen: set[str] = set()
            for j, cell in enumerate(flow.matrix):
                field = f"flows[{i}].matrix[{j}]"
                for device in self._fan_out(cell, field):
                    if device.info.id in seen:
                        continue
                    seen.add(device.info.id)
                    runs.append(
                        RunRecord(
                            id=new_id(),
                            request=request,
                            target=device.info.id,
                            batch=batch_id,
                            priority=flow.priority,
                            submitted_at=now,
                            schedule=schedule,
                            owner=owner,
                            suite=sub.suite,
                            flow=flow.name,
                            retries=flow.retries,
                        )
                    )
        self._check_backlog(len(runs))
        batch = BatchRecord(
            id=batch_id,
            total=len(runs),
            created_at=now,
            goal=sub.flows[0].goal,
            runs=tuple(r.id for r in runs),
            suite=sub.suite,
            owner=owner,
        )
        idem = self._idem(idempotency_key, sub, owner)
        existing = self.store.create(runs, batch=batch, idem=idem, webhook=sub.webhook)
        if existing is not None:
            ref = self._replay(existing, idem, "batch")
            found = self.store.batch(ref)
            if found is None:
                raise NotFoundError(f"batch {ref} named by the idempotency key has expired")
            return found, False
        self._dispatch([r.id for r in runs])
        return self.store.batch(batch_id) or batch, True

    def _fan_out(self, selector: Selector, field: str) -> list[DeviceState]:
        try:
            return self._batch_targets(BatchSubmit(goal="-", selector=selector))
        except InvalidRequestError as exc:
            problem = exc.problems[0]
            raise InvalidRequestError(field, problem.problem, problem.fix) from None

    def _batch_targets(self, sub: BatchSubmit) -> list[DeviceState]:
        """The devices a batch's selector matches, read afresh (a fan-out: the live, healthy
        ones, one run each); refused when there are none."""
        view = self.dispatcher.view
        view.reload()
        devices = view.all()
        targets = matching(devices, None, sub.selector)
        if not targets:
            raise InvalidRequestError(
                "selector",
                f"matches no registered device ({self._describe(devices)})",
                "loosen the selector (platform, os_version, labels) or start a worker for it",
            )
        if sub.count is None:
            # one run pinned to each device: a down or quarantined device would keep its run
            # pending, and the batch unfinished, until it came back
            targets = [d for d in targets if d.alive and not d.quarantined]
            if not targets:
                raise InvalidRequestError(
                    "selector",
                    f"matches no live, healthy device ({self._describe(devices)})",
                    "start (or restart) a worker for a matching device, wait for a quarantined "
                    "one to pass its probe, or loosen the selector",
                )
        return targets

    def _dispatch(self, run_ids: list[str]) -> None:
        """The fast path. The runs are already stored and pending, so a failure here is not
        the caller's: the scheduler's loop places them later."""
        try:
            if self.dispatcher.dispatch(run_ids) < len(run_ids):
                self.store.wake()  # the scheduler places the rest (its view may know more)
        except Exception:  # a broker or store blip; logged, and the scheduler retries
            log.exception(
                "dispatch_after_submit_failed",
                runs=len(run_ids),
                hint="the runs are pending; the scheduler will place them",
            )

    def _check_target(self, device: str | None, selector: Selector | None) -> None:
        """The run names a registered device, or its selector matches one. Checked against
        the dispatcher's cached view; only a miss re-reads the registry, so a device that
        registered a moment ago is never refused."""
        view = self.dispatcher.view
        if view.has_match(device, selector):
            return
        view.reload()
        devices = view.all()
        if device is not None and not matching(devices, device, None):
            raise InvalidRequestError(
                "device",
                f"no device {device!r} is registered ({self._describe(devices)})",
                "use a registered device id (GET /v1/devices), or a selector",
            )
        if device is None and not matching(devices, None, selector):
            raise InvalidRequestError(
                "selector",
                f"matches no registered device ({self._describe(devices)})",
                "loosen the selector (platform, os_version, labels) or start a worker for it",
            )

    @staticmethod
    def _describe(devices: list[DeviceState]) -> str:
        if not devices:
            return "no devices are registered"
        shown = ", ".join(
            f"{d.info.id} [{d.info.platform.value}{_health(d)}]" for d in devices[:10]
        )
        more = f" and {len(devices) - 10} more" if len(devices) > 10 else ""  # noqa: PLR2004
        return f"registered: {shown}{more}"

    def _check_backlog(self, n: int) -> None:
        if self.store.pending_count() + n > self.max_pending:
            raise self._too_many()

    def _too_many(self) -> TooManyPendingError:
        return TooManyPendingError(
            f"{self.max_pending} runs are already pending; retry later or add devices"
        )

    @staticmethod
    def _idem(
        key: str | None, sub: RunSubmit | BatchSubmit | SuiteSubmit, owner: str | None
    ) -> Idempotency | None:
        """The key, the owner's own (`owner/key`: a key never names another's run; `/` is in
        no key or owner name), and the body's hash (serialised only when a key is given)."""
        if key is None:
            return None
        scoped = key if owner is None else f"{owner}/{key}"
        return Idempotency(key=scoped, body_hash=_body_hash(sub.model_dump_json()))

    def _replay_run(self, existing: str, idem: Idempotency | None) -> RunRecord:
        ref = self._replay(existing, idem, "run")
        found = self.store.load(ref)
        if found is None:
            raise NotFoundError(f"run {ref} named by the idempotency key has expired")
        return found

    @staticmethod
    def _replay(existing: str, idem: Idempotency | None, kind: str) -> str:
        ref, _, body_hash = existing.partition("|")
        got_kind, _, ident = ref.partition(":")
        if idem is None or body_hash != idem.body_hash or got_kind != kind:
            raise ConflictError(
                "this Idempotency-Key was already used for a different request; use a new key "
                "for a new request"
            )
        return ident

    # -- reads and cancel ------------------------------------------------------------------

    def run(self, run_id: str) -> RunRecord:
        run = self.store.load(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r} (unknown, or past its retention)")
        return run

    def runs(self, query: RunQuery) -> RunPage:
        """A page of runs, newest first (`scheduler.store.listing`)."""
        return self.store.listing.page(query)

    def steps(self, run_id: str, *, after: int = 0) -> list[StepRow]:
        self.run(run_id)
        return self.store.steps(run_id, after=after)

    def showed(self, run_id: str, artifact: str) -> bool:
        """Whether a step of the run `run_id` (its id resolved) ever showed the picture
        `artifact`, in a row since written anew or not."""
        return self.store.showed(run_id, artifact)

    def batch(self, batch_id: str) -> BatchRecord:
        batch = self.store.batch(batch_id)
        if batch is None:
            raise NotFoundError(f"no batch {batch_id!r} (unknown, or past its retention)")
        return batch

    def cancel(self, run_id: str) -> tuple[RunRecord, CancelOutcome]:
        """The run after the cancel, and `cancelled` (it was queued: it is cancelled now) or
        `requested` (it is running: its worker stops before its next step)."""
        out = self.store.cancel(run_id)
        if out == "missing":
            raise NotFoundError(f"no run {run_id!r} (unknown, or past its retention)")
        if out.startswith("terminal:"):
            raise ConflictError(f"run {run_id} already ended ({out.partition(':')[2]})")
        if out == "cancelled":
            self.store.wake()
            return self.run(run_id), "cancelled"
        if out != "requested":
            raise ConflictError(f"run {run_id} is being placed right now; retry the cancel")
        return self.run(run_id), "requested"

    def devices(self) -> list[DeviceState]:
        return self.store.registry.devices()
