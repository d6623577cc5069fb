"""Questions: runs whose last decider escalated, parked for a person.

    worker     park(record, token, result, question)   running → awaiting_answer, device freed
    API        answer(run_id, answer, who)              awaiting_answer → queued (re-dispatched)
                                                        or → done / blocked
    scheduler  expire()                                 awaiting_answer → escalated, past deadline
    API        cancel(run_id)                           awaiting_answer → cancelled

A target answer is written to the decision memory (source `human`, keyed exactly as the run's
next attempt will look the screen up) and the run queued again, in one script with the check
that the run still waits for the question answered (`lua/answer.lua`): it passes that screen
from memory and carries on, and so does every later run on every device, while an answer
refused (a cancel, the expiry or another answer came first) teaches nothing. Every
transition is one Lua script, so a run is never half-parked or answered twice. Parking is a
step write of the worker's, fenced by its device lease like the claim and the finish
(`workers.fleet.state.runs`): a worker that lost the lease hands the run back instead.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import cast

import redis

from workers.core.errors import ConfigError
from workers.core.memory import Remembered, Target, memory_key, normalise_goal
from workers.core.model import Attempt, PhaseTotals, Platform, RunResult, RunStatus
from workers.core.records import Answer, Question, RunRecord
from workers.core.words import DEFAULT_DANGEROUS, word_pattern
from workers.fleet.fence import Fence
from workers.fleet.keys import Keys
from workers.fleet.memory_store import RedisMemory
from workers.fleet.state.runs import RunStore, check_fence, pending_score
from workers.fleet.state.scripts import RedisStore, Script


class NotAwaitingError(ConfigError):
    """The run is not (or no longer) waiting for an answer."""


class QuestionStore(RedisStore):
    _park = Script("park")
    _answer = Script("answer")
    _end = Script("end_question")

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        retention_s: int,
        memory_ttl_s: int,
        dangerous: tuple[str, ...] = DEFAULT_DANGEROUS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(client, keys)
        self.dangerous = word_pattern(dangerous)
        self.runs = RunStore(client, keys)
        self.retention_s = retention_s
        self.memory_ttl_s = memory_ttl_s
        self.clock = clock

    # -- the worker -------------------------------------------------------------------------

    def park(
        self,
        record: RunRecord,
        token: str,
        result: RunResult,
        question: Question,
        *,
        fence: Fence | None = None,
    ) -> int:
        """1 parked; 0 the claim was lost; 2 not parked: a cancel was requested meanwhile
        (the worker then finishes the run as usual). Fenced like every step write:
        `LeaseLostError` when `fence`'s token no longer holds the device's lease (None:
        unfenced)."""
        device = record.device or ""
        lease = self.k.lease(fence.device_id if fence else device)
        out = self._park(
            keys=[
                self.k.run(record.id),
                self.k.device(device),
                self.k.question(record.id),
                self.k.questions,
                self.k.wake,
                lease,
                self.k.running,
            ],
            args=[
                token,
                result.model_dump_json(),
                result.reason[:500],
                repr(self.clock()),
                record.id,
                question.model_dump_json(),
                repr(question.deadline),
                fence.holder if fence else "",
            ],
        )
        check_fence(out, fence, f"parking run {record.id}")
        return int(out)

    # -- reading ----------------------------------------------------------------------------

    def get(self, run_id: str) -> Question | None:
        raw = cast("str | None", self.r.get(self.k.question(run_id)))
        return Question.model_validate_json(raw) if raw else None

    def open(self) -> list[Question]:
        """Open questions, the one expiring first first."""
        ids = cast("list[str]", self.r.zrange(self.k.questions, 0, -1))
        if not ids:
            return []
        raws = cast("list[str | None]", self.r.mget([self.k.question(i) for i in ids]))
        return [Question.model_validate_json(raw) for raw in raws if raw]

    # -- answering --------------------------------------------------------------------------

    def answer(self, run_id: str, answer: Answer, *, who: str) -> str:
        """Apply a person's answer; returns the run's new status. Raises `NotAwaitingError`
        when there is no open question (or it is no longer the one read here: answered,
        cancelled or expired meanwhile), `ConfigError` naming the valid candidates when the
        answer names none of this screen's. One script checks the run still waits for this
        question, writes the answer's memory entry and requeues or ends the run
        (`lua/answer.lua`): a refused answer has written nothing."""
        asked = cast("str | None", self.r.get(self.k.question(run_id)))
        record = self.runs.load(run_id)
        if asked is None or record is None or record.status is not RunStatus.AWAITING_ANSWER:
            raise NotAwaitingError(f"run {run_id!r} is not waiting for an answer")
        question = Question.model_validate_json(asked)
        status = RunStatus.BLOCKED if answer.blocked else RunStatus.DONE if answer.done else None
        end = ["", "", "", 0]  # a control: the run is queued again, not ended
        if status is not None:
            end = self._end_args(record, status, f"a person ({who}) answered {status.value}")
        entry = None if answer.blocked else self._entry(question, answer, who)
        memory = RedisMemory(self.r, self.k, decider=question.decider, ttl_s=self.memory_ttl_s)
        learnt = [entry.key, self.memory_ttl_s, *memory.fields(entry)] if entry else ["", 0]
        ok = self._answer(
            keys=[
                self.k.run(run_id),
                self.k.question(run_id),
                self.k.questions,
                self.k.pending,
                self.k.wake,
                self.k.reserved,
                self.k.running,
                self.k.batch_of(record.batch),
                self.k.steps(run_id),
                self.k.memory(entry.key if entry else "-"),
                self.k.memory_index(),
            ],
            args=[
                run_id,
                hashlib.sha1(asked.encode()).hexdigest(),  # noqa: S324 - Redis's sha1hex, no secret
                (status or RunStatus.QUEUED).value,
                pending_score(record.priority, record.submitted_at),
                *end,
                *learnt,
            ],
        )
        if not ok:
            raise NotAwaitingError(f"run {run_id!r} is not waiting for an answer")
        return (status or RunStatus.QUEUED).value

    def _entry(self, q: Question, answer: Answer, who: str) -> Remembered:
        base = {
            "key": memory_key(q.screen, q.decider),
            "source": "human",
            "origin": who,
            "goal": normalise_goal(q.goal),
            "screen": q.screen.screen,
        }
        if answer.done:
            return Remembered(done=True, **base)
        cands = q.screen.candidates
        if answer.ref is not None:
            chosen = [c for c in cands if c.ref == answer.ref]
        else:
            chosen = [c for c in cands if c.name.casefold() == (answer.target or "").casefold()]
        valid = ", ".join(f"{c.ref} {c.name!r}" for c in cands) or "none"
        if not chosen:
            raise ConfigError(
                f"the answer names no candidate of this screen; valid: {valid}",
                hint="answer with --target NAME or --ref REF from that list",
            )
        if len(chosen) > 1:
            refs = ", ".join(c.ref for c in chosen)
            raise ConfigError(f"{len(chosen)} candidates are named so ({refs}); answer by --ref")
        c = chosen[0]
        if c.kind.fillable:
            raise ConfigError(
                f"{c.name!r} is a text field: a person answers with a control to press "
                "(the run types its inputs itself)"
            )
        if self.dangerous is not None and self.dangerous.search(c.name):
            raise ConfigError(
                f"{c.name!r} matches the dangerous-controls guard: no run presses it, whoever "
                "decides",
                hint="answer --blocked, or take the word off GOALFLEET_DANGEROUS_CONTROLS",
            )
        target = Target.of(cands, c.ref)
        if target is None:  # pragma: no cover - c is one of cands
            raise AssertionError("chosen candidate not on screen")
        return Remembered(target=target, **base)

    # -- ending -----------------------------------------------------------------------------

    def expire(self) -> int:
        """End every question past its deadline `escalated` (as without a person)."""
        now = self.clock()
        ended = 0
        for run_id in cast("list[str]", self.r.zrangebyscore(self.k.questions, 0, now)):
            record = self.runs.load(run_id)
            if record is None:
                self.r.zrem(self.k.questions, run_id)
                continue
            try:
                self._finish(record, RunStatus.ESCALATED, "no answer before the question expired")
            except NotAwaitingError:  # answered or cancelled since the read: theirs to end
                continue
            ended += 1
        return ended

    def cancel(self, run_id: str) -> bool:
        """Cancel a parked run (True), or False when it is not parked (any more: an answer
        or the expiry may end its question between the read and the cancel)."""
        record = self.runs.load(run_id)
        if record is None or record.status is not RunStatus.AWAITING_ANSWER:
            return False
        try:
            self._finish(record, RunStatus.CANCELLED, "cancelled by the caller")
        except NotAwaitingError:
            return False
        return True

    def _finish(self, record: RunRecord, status: RunStatus, reason: str) -> str:
        ok = self._end(
            keys=[
                self.k.run(record.id),
                self.k.question(record.id),
                self.k.questions,
                self.k.batch_of(record.batch),
                self.k.steps(record.id),
            ],
            args=[record.id, status.value, *self._end_args(record, status, reason)],
        )
        if not ok:
            raise NotAwaitingError(f"run {record.id!r} is not waiting for an answer")
        return status.value

    def _end_args(self, record: RunRecord, status: RunStatus, reason: str) -> list[object]:
        """A parked run's end as `lib/question.lua`'s `end_question` takes it: its result
        (the steps so far, kept), reason, end time and retention."""
        before = record.result
        result = RunResult(
            status=status,
            reason=reason,
            goal=record.request.goal,
            steps=before.steps if before else (),
            totals=before.totals if before else PhaseTotals(),
            duration_ms=before.duration_ms if before else 0.0,
            run_id=record.id,
            device_id=before.device_id if before else record.device,
            attempt=record.attempt,
        )
        return [result.model_dump_json(), reason, repr(self.clock()), self.retention_s]


def question_for(
    record: RunRecord,
    result: RunResult,
    *,
    asked_at: float,
    timeout_s: float,
    platform: Platform | None,
) -> Question | None:
    """The question for an escalated result, from its last step row (None when that step
    never reached a decider: nothing a person could answer)."""
    last = result.steps[-1] if result.steps else None
    if last is None or last.seen is None:
        return None
    attempts = last.attempts or (
        (Attempt(decider=record.request.decider, decision=last.decision, escalated=result.reason),)
        if last.decision
        else ()
    )
    return Question(
        run_id=record.id,
        goal=record.request.goal,
        step=last.index,
        screen=last.seen,
        attempts=attempts,
        reason=result.reason,
        decider=record.request.decider,
        platform=platform,
        device=record.device or "",
        asked_at=asked_at,
        deadline=asked_at + timeout_s,
    )
