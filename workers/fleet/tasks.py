"""The run task: a message carries one run id; everything else is read from the store.

`execute_run` is the whole body (claim → resolve secrets → device + decider → `run_request`:
its journey or its one goal, step rows written as they happen → final result), kept free of
Celery so it can be tested without a worker. `register_tasks` binds it to an app.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from typing import Any

import structlog
from celery.exceptions import SoftTimeLimitExceeded

from workers.core.app import AppUnderTest
from workers.core.chain import Tier
from workers.core.device_hooks import with_hooks
from workers.core.errors import ConfigError, DecideError, DecisionInvalidError, DeviceError
from workers.core.journey import run_request
from workers.core.model import ErrorInfo, RunResult, RunStatus, StepRow
from workers.core.ports import DevicePort
from workers.core.records import RunRecord
from workers.core.request import GoalRunRequest
from workers.core.rows import totals
from workers.core.secrets import resolve_inputs
from workers.core.video import Videographer
from workers.fleet import runtime as runtime_mod
from workers.fleet.artifacts import RUN_MARGIN_S, make_videographer
from workers.fleet.delivery import send_again, send_run
from workers.fleet.fence import LeaseLostError, open_fenced
from workers.fleet.keys import RUN_TASK
from workers.fleet.memory_store import RedisMemory
from workers.fleet.outages import describe, is_outage, requeue_delay_s
from workers.fleet.outbox import RowOutbox, RunCancelledError
from workers.fleet.runtime import WorkerRuntime
from workers.fleet.spend import RedisLedger
from workers.fleet.state.questions import QuestionStore, question_for
from workers.fleet.state.runs import Claim, ClaimKind, ClaimLostError
from workers.fleet.state.states import Failure
from workers.telemetry.observers import RunObserver

log = structlog.stdlib.get_logger("goalfleet.worker")


def failure_of(result: RunResult) -> Failure:
    """How a result counts towards device health: infra and decision failures apart.

    Only the device's own failures count against it: a device error, a run that hung on it
    (soft time limit), or a worker that died or hit its hard limit on it (no error recorded).
    A model outage, a bad configuration or a
    bug of ours is not the device's fault and must not quarantine the fleet."""
    if result.status is RunStatus.DONE:
        return Failure.NONE
    if result.status is RunStatus.ERRORED:
        if result.error is None or result.error.device_fault:
            return Failure.INFRA
        return Failure.NEUTRAL
    if result.status in {
        RunStatus.BLOCKED,
        RunStatus.ESCALATED,
        RunStatus.MAX_STEPS,
        RunStatus.OVER_BUDGET,
    }:
        return Failure.DECISION
    return Failure.NEUTRAL


def _errored(
    record: RunRecord,
    reason: str,
    exc: BaseException | None = None,
    steps: tuple[StepRow, ...] = (),
    info: ErrorInfo | None = None,
    *,
    duration_ms: float = 0.0,
) -> RunResult:
    """An `errored` result that keeps the step rows written before the failure, their
    totals (tokens included) and the attempt's true duration."""
    if exc is not None:
        code = getattr(exc, "code", type(exc).__name__.upper())
        info = ErrorInfo(
            type=type(exc).__name__,
            code=str(code),
            message=str(exc)[:500],
            # a run that hung on the device (soft time limit) counts against it
            device_fault=getattr(exc, "device_fault", isinstance(exc, SoftTimeLimitExceeded)),
        )
    return RunResult(
        status=RunStatus.ERRORED,
        reason=reason,
        goal=record.request.goal,
        error=info,
        steps=steps,
        totals=totals(steps),
        duration_ms=round(duration_ms, 3),
    )


def _ended(
    record: RunRecord, status: RunStatus, reason: str, steps: tuple[StepRow, ...], took_ms: float
) -> RunResult:
    """A result the loop did not make (it was stopped from outside), with the rows so far."""
    return RunResult(
        status=status,
        reason=reason,
        goal=record.request.goal,
        steps=steps,
        totals=totals(steps),
        duration_ms=round(took_ms, 3),
    )


def _memory(rt: WorkerRuntime, req: GoalRunRequest, outbox: RowOutbox) -> RedisMemory | None:
    """The fleet's decision memory for this run, keyed by its decider, its reads riding on the
    run's row writes (`outbox`); None when switched off fleet-wide (`GOALFLEET_MEMORY=false`)
    or for this run (`"memory": false`)."""
    if not (rt.settings.memory and req.memory):
        return None
    return RedisMemory(
        rt.redis,
        rt.store.k,
        decider=req.decider,
        ttl_s=rt.settings.memory_ttl_s,
        ride=outbox.ride,
    )


def _video(rt: WorkerRuntime, req: GoalRunRequest) -> Videographer | None:
    """The run's video policy: the run's own mode (`"video"`), else the fleet's."""
    if req.video is None:
        return rt.video
    return make_videographer(rt.settings, mode=req.video)


def _each(rt: WorkerRuntime, hook: Callable[[RunObserver], None], what: str) -> None:
    """Call `hook` on every observer; one that raises is logged and never stops the run."""
    for obs in rt.observers:
        try:
            hook(obs)
        except Exception:
            log.exception("observer_failed", observer=repr(obs), hook=what)


def execute_run(rt: WorkerRuntime, run_id: str) -> str:
    """Run one goal run on this worker's device. Returns the final status (or why skipped).

    The claim reads the run as it leaves it (one round trip before the device opens). A
    worker that lost its device lease (`LeaseLostError`: at the claim, before a device
    action, at a step write or at the finish) hands the run back to pending instead."""
    claim: Claim | None = None
    try:
        if rt.fence is not None:
            rt.fence.check("claiming a run")
        claim = rt.store.claim(
            run_id, rt.device_id, rt.spec.name, cap=rt.settings.attempt_cap, fence=rt.fence
        )
        if claim.record is None:  # missing, ended, or moved to another device
            return f"skipped:{claim.kind.value}"
        return _claimed(rt, claim.record, claim)
    except LeaseLostError as exc:
        record = claim.record if claim is not None else rt.store.load(run_id)
        if record is None:
            return "skipped:missing"
        return _stand_aside(rt, record, claim.token if claim is not None else "", exc)


def _stand_aside(rt: WorkerRuntime, record: RunRecord, token: str, exc: LeaseLostError) -> str:
    """The lease is gone: the run goes back to pending (its attempt counted once, nothing
    counted against the device); another holder closes the fence for good, which the
    heartbeat turns into the worker standing down.

    Refused at the claim, the run may still be running under this process's own lease
    holder: a claim whose pool child died, sent again (`send_again`), while Redis lost the
    lease (a failover). That run is handed back by its holder; left, the heartbeat would
    take the lease back and hold a run nobody executes until the overdue sweep."""
    if exc.taken and rt.fence is not None:
        rt.fence.lose()
    holder = rt.fence.holder if rt.fence is not None and not token else ""
    handed = rt.store.hand_back(record, rt.device_id, token, holder=holder)
    log.warning(
        "run_handed_back" if handed else "run_not_handed_back",
        run_id=record.id,
        device_id=rt.device_id,
        reason=str(exc),
    )
    return "skipped:lease-lost"


def _claimed(rt: WorkerRuntime, record: RunRecord, claim: Claim) -> str:
    """The run once claimed (or found exhausted): run it, park or finish it."""
    run_id = record.id
    outbox = RowOutbox(rt.store, run_id, claim.token, rt.fence, cancelled=record.cancel_requested)
    if claim.kind is ClaimKind.EXHAUSTED:
        result = _errored(
            record,
            f"delivered {claim.attempt} times (attempt cap {rt.settings.attempt_cap}); "
            "the worker kept dying or timing out on this run",
        )
    else:
        _each(rt, lambda o: o.run_started(record, claim.attempt), "run_started")
        result = _run(rt, record, outbox)
    result = result.model_copy(
        update={"run_id": run_id, "device_id": rt.device_id, "attempt": claim.attempt}
    )
    parked = _park(rt, record, claim, result, outbox)
    if parked is not None:
        return parked
    ok = rt.store.finish(
        record,
        claim.token,
        result,
        failure=failure_of(result),
        quarantine_after=rt.settings.quarantine_after,
        retention_s=rt.settings.retention_s,
        fence=rt.fence,
        rows=outbox.take(),  # the rows made after the run's last device action
    )
    if not ok:
        log.warning("claim_lost_before_finish", run_id=run_id)
        return "skipped:claim-lost"
    _each(rt, lambda o: o.run_finished(record, result), "run_finished")
    return result.status.value


PARK_CANCELLED = 2
"""`QuestionStore.park`'s answer when a cancel was requested while the last step escalated."""


def _park(
    rt: WorkerRuntime, record: RunRecord, claim: Claim, result: RunResult, outbox: RowOutbox
) -> str | None:
    """Park an escalated run for a person (its device is released at once); None when it
    is not to be parked: not escalated, questions off, the run's decision memory off (an
    answer reaches the run through the memory), a cancel requested meanwhile, or nothing a
    person could answer."""
    req = record.request
    if not (
        result.status is RunStatus.ESCALATED
        and rt.settings.questions
        and req.ask_person
        and rt.settings.memory
        and req.memory
    ):
        return None
    question = question_for(
        record,
        result,
        asked_at=time.time(),
        timeout_s=rt.settings.question_timeout_s,
        platform=rt.spec.info.platform,
    )
    if question is None:
        return None
    waiting = result.model_copy(update={"status": RunStatus.AWAITING_ANSWER})
    store = QuestionStore(
        rt.redis,
        rt.store.k,
        retention_s=rt.settings.retention_s,
        memory_ttl_s=rt.settings.memory_ttl_s,
        dangerous=tuple(rt.settings.dangerous_controls),
    )
    outbox.flush()  # a parked run's rows are all written before a person sees its question
    parked = store.park(record, claim.token, waiting, question, fence=rt.fence)
    if parked == PARK_CANCELLED:
        return None  # the caller asked to cancel: finish it, do not ask a person
    if not parked:
        log.warning("claim_lost_before_park", run_id=record.id)
        return "skipped:claim-lost"
    _each(rt, lambda o: o.run_parked(record, waiting, question), "run_parked")
    return RunStatus.AWAITING_ANSWER.value


def _run(rt: WorkerRuntime, record: RunRecord, outbox: RowOutbox) -> RunResult:
    """The run on the device, with the app it drove in its result and every row. Each row
    goes to `outbox`, which writes it before the next device action (`workers.fleet.outbox`)."""
    req = record.request
    device: DevicePort | None = None
    app: AppUnderTest | None = None

    rows: list[StepRow] = []
    started = time.perf_counter()

    def on_step(row: StepRow) -> None:
        if app is not None:
            row = row.model_copy(update={"app": app})
        outbox.add(row)
        rows.append(row)
        _each(rt, lambda o: o.step(record, row), "step")

    def should_cancel() -> bool:
        return outbox.cancelled

    try:
        inputs = resolve_inputs(req, rt.secrets)
        decider = rt.make_decider(req.decider)
        if rt.host is not None:
            app = rt.host.prepare(req.app, req.reset)
        device = with_hooks(open_fenced(rt.open_device, record.id, rt.fence), outbox)
        result = run_request(
            device,
            req,
            decider=decider,
            video=_video(rt, req),
            inputs=inputs,
            memory=_memory(rt, req, outbox),
            escalate_to=tuple(
                Tier(spec, rt.make_decider(spec))
                for spec in (req.escalate_to or rt.settings.escalate_to)
            ),
            on_step=on_step,
            should_cancel=should_cancel,
            camera=rt.camera,
            prices=rt.settings.prices,
            ledger=_ledger(rt, record),
            dangerous=tuple(rt.settings.dangerous_controls),
        )
        # every row went through `on_step`, which gave it the app
        return result.model_copy(update={"app": app, "steps": tuple(rows)}) if app else result
    except LeaseLostError:
        raise  # not this run's failure: `execute_run` hands it back to pending
    except RunCancelledError:  # seen by a row write just before an action, which was not made
        took = (time.perf_counter() - started) * 1000
        return _with_app(
            _ended(record, RunStatus.CANCELLED, "cancelled by the caller", tuple(rows), took), app
        )
    except Exception as exc:  # every other failure becomes a recorded result
        if is_outage(exc):
            raise  # Redis stayed unavailable for longer than the run may wait: requeued
        took = (time.perf_counter() - started) * 1000
        return _with_app(_failed(rt, record, exc, tuple(rows), took), app)
    finally:
        if device is not None:
            with contextlib.suppress(DeviceError):
                device.close()


def _with_app(result: RunResult, app: AppUnderTest | None) -> RunResult:
    return result.model_copy(update={"app": app}) if app else result


def _ledger(rt: WorkerRuntime, record: RunRecord) -> RedisLedger | None:
    """The batch's spending, when the run's suite has a budget."""
    if record.batch is None or record.request.suite_budget is None:
        return None
    ttl = rt.settings.retention_s + RUN_MARGIN_S if rt.settings.retention_s else 0
    return RedisLedger.of(rt.redis, rt.store.k, record.batch, ttl_s=ttl)


_WHY: tuple[tuple[type[Exception], str], ...] = (
    (ConfigError, "configuration: {exc}"),
    (DecisionInvalidError, "decider: {exc}"),  # raised by a decider factory at construction
    (DeviceError, "device could not be opened: {exc}"),
    (DecideError, "decider could not be built: {exc}"),
    (ClaimLostError, "{exc}"),
)


def _failed(
    rt: WorkerRuntime,
    record: RunRecord,
    exc: Exception,
    rows: tuple[StepRow, ...],
    duration_ms: float,
) -> RunResult:
    """The `errored` result for a failure outside the loop (the loop types its own)."""
    if isinstance(exc, SoftTimeLimitExceeded):
        why = f"soft time limit ({rt.settings.soft_time_limit_s:g} s) exceeded"
        return _errored(record, why, exc, rows, duration_ms=duration_ms)
    for cls, why in _WHY:
        if isinstance(exc, cls):
            return _errored(record, why.format(exc=exc), exc, rows, duration_ms=duration_ms)
    # A bug of ours. Its message could hold anything, so only the type goes into the stored
    # result; the traceback goes to the (redacting) worker log. The run is never left running.
    log.error("unexpected_error", run_id=record.id, exc_info=exc)
    info = ErrorInfo(type=type(exc).__name__, code="INTERNAL", message="see the worker log")
    why = f"internal error ({type(exc).__name__}); see the worker log"
    return _errored(record, why, steps=rows, info=info, duration_ms=duration_ms)


def register_tasks(app: Any) -> None:  # noqa: ANN401 - Celery ships no type hints
    """Bind the run task to `app` (time limits and acks come from the app's conf)."""

    # No Celery result: the run record holds the result, and a result write Redis refuses
    # (full) must not fail the task.
    @app.task(name=RUN_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def run(self: Any, run_id: str) -> str:  # noqa: ANN401 - Celery's bound task
        rt = runtime_mod.current()
        try:
            return execute_run(rt, run_id)
        except Exception as exc:
            if not is_outage(exc):
                raise
            # Every store call waited the outage out with backoff (`outages.OutageRetry`) for
            # as long as a run may take: pause (jittered), then send the run to this device
            # again (the claim counts the attempt), waiting for Redis to take the message for
            # as long as this worker holds the lease; lost, the lapsed sweep re-pends it. One
            # attempt at most, however long the outage; a short one costs the run time only.
            time.sleep(requeue_delay_s(rt.settings.soft_time_limit_s, rt.settings.time_limit_s))
            fence = rt.fence
            send_again(
                functools.partial(send_run, self.app),
                run_id,
                rt.device_id,
                give_up=lambda: fence is not None and fence.lost,
            )
            return f"sent-again:{describe(exc)}"
