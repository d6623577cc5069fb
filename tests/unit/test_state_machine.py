"""The run and device state machine (`workers.fleet.state`) under random interleavings of every
transition, from several processes (a worker per device, each incarnation with its own lease
token; the scheduler; the API), against a real redis-server. After every step the whole of
Redis is read back and the machine's invariants checked:

- a device's current run exists and is reserved or running on that device;
- a queued run is in exactly one of pending or reserved, and is reserved exactly when it holds
  a device, which holds it back;
- a running run is in the running index, its device holds it, and it names the lease token
  of the worker process that claimed it (the sweep re-pends it once that token no longer
  holds the device's lease: `lua/release_lapsed.lua`);
- a terminal run holds no device and is in no index (pending, reserved, running, questions);
- a quarantined device is never reserved;
- a run's attempts never decrease (but for a person's answer, which queues the run afresh:
  `lua/answer.lua`);
- nothing (an index, a device, a question) refers to a run that does not exist;
- the decision memory holds the entry of the last answer taken, and nothing of one refused;
- every run is in the run list, and a run that ended is in the index of its end status only;
- with a history writer on, the history outbox holds exactly the runs that ended.

The delivery half (docs/design.md, "One delivery protocol"): the broker's queue is the fake's
list (`RecordingEnqueuer`), a message is taken off it on receipt (at most once), and the
scheduler's sends go through the dispatcher (`Dispatcher.deliver`), its resends through its
real sweep (`Dispatcher.sweep`), a worker's own resend through `send_again`. The machine may
crash the sender between a reservation and its send, lose a message with the worker process
that took it, and kill a pool child mid-run. After every step:

- every reserved run has its message queued for its device, or its redelivery is owed to the
  orphan sweep (its send crashed, or its message was lost), and after a sweep no reserved run
  is without its message;
- every running run is being executed by its device's current worker, or has a message
  queued for its device (its pool child died: the worker sent it again), or its claiming
  worker no longer holds the lease (the lapsed sweep re-pends it): no run is stranded.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from typing import cast

import hypothesis.strategies as st
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from scheduler.dispatch.dispatcher import Dispatcher
from scheduler.store.enqueue import RecordingEnqueuer
from scheduler.store.runs import FleetStore
from workers.core.model import DecideState, Outcome, Platform, RunResult, RunStatus, StepRow
from workers.core.records import Answer, DeviceInfo, Question, RunRecord
from workers.core.request import GoalRunRequest
from workers.core.screen import Candidate, Kind
from workers.fleet.delivery import send_again
from workers.fleet.fence import Fence, LeaseLostError
from workers.fleet.keys import Keys, lease_holder, worker_name
from workers.fleet.memory_store import RedisMemory
from workers.fleet.state.devices import DeviceTakenError
from workers.fleet.state.questions import NotAwaitingError, QuestionStore
from workers.fleet.state.runs import ClaimLostError, RunStore
from workers.fleet.state.states import Failure

DEVICES = ("d0", "d1")
ENDS = (RunStatus.DONE, RunStatus.BLOCKED, RunStatus.ERRORED, RunStatus.MAX_STEPS)
FAILURES = (Failure.INFRA, Failure.INFRA, Failure.NONE, Failure.DECISION, Failure.NEUTRAL)
"""Infrastructure failures twice as often: each one quarantines its device (quarantine after 1)."""
THEN = st.one_of(
    st.tuples(st.just("step")),
    st.tuples(st.just("finish"), st.sampled_from(ENDS), st.sampled_from(FAILURES)),
    st.tuples(st.just("finish"), st.sampled_from(ENDS), st.sampled_from(FAILURES)),
    st.tuples(st.just("park"), st.sampled_from(["-10", "60"])),
    st.tuples(st.just("hand_back")),
    st.tuples(st.just("child_dies")),
)
"""What a worker does with a run it claimed (a step; an end, and how it counts towards the
device's health; a question for a person, expired at once or not; a hand back; its pool child
dies or hits the hard time limit)."""


@dataclass
class Worker:
    """One worker process of a device: its lease token, and the claim it holds (if any)."""

    device: str
    holder: str
    claims: dict[str, str] = field(default_factory=dict)  # run id -> claim token

    def fence(self) -> Fence:
        return Fence(self.device, self.holder, lease_s=30)


class FleetMachine(RuleBasedStateMachine):
    runs = Bundle("runs")

    def __init__(self, client: redis.Redis) -> None:
        super().__init__()
        self.r = client
        self.r.flushdb()
        self.k = Keys("sm")
        self.now = 1_000.0
        self.r.set(self.k.history_on, "1")  # a history writer runs: ended runs join its outbox
        self.store = FleetStore(client, self.k, retention_s=0)
        self.rs = RunStore(client, self.k)
        self.qs = QuestionStore(
            client, self.k, retention_s=0, memory_ttl_s=60, clock=lambda: self.now
        )
        self.enq = RecordingEnqueuer(client, self.k)
        self.dispatcher = Dispatcher(self.store, self.enq, orphan_after_s=1e-9)
        self.holders: dict[str, str] = {}  # claim token -> the lease token of its worker
        self.owed: set[str] = set()
        """Reservations whose message the orphan sweep owes: the send crashed, or the worker
        process that took the message died."""
        self.workers: dict[str, Worker] = {}  # device -> its current worker process
        self.retired: list[Worker] = []  # earlier processes: replaced, or deregistered
        self.attempts: dict[str, int] = {}
        self.ids = itertools.count()
        self.memory = RedisMemory(client, self.k, decider="rules", ttl_s=60)
        self.taught: str | None = None  # who answered last with a control or done

    # -- devices ---------------------------------------------------------------------------

    @initialize(target=runs)
    def runs_on_their_way(self) -> object:
        """Every example starts with a run reserved and sent for each device (the delivery
        half has messages to take from its first step)."""
        for d in DEVICES:
            self._register(d)
        return multiple(*[self.submit(d, 0, crash=False) for d in DEVICES])

    def _register(self, device: str) -> None:
        worker = Worker(device, lease_holder(worker_name(device)))
        info = DeviceInfo(id=device, platform=Platform.IOS, os_version="17.5")
        try:
            self.store.registry.register(info, worker.holder, lease_s=30)
        except DeviceTakenError:
            return
        if (old := self.workers.get(device)) is not None and old.holder != worker.holder:
            self.retired.append(old)
        self.workers[device] = worker

    @rule(device=st.sampled_from(DEVICES))
    def register(self, device: str) -> None:
        """A (new) worker process for `device` starts."""
        self._register(device)

    @rule(device=st.sampled_from(DEVICES))
    def renew(self, device: str) -> None:
        if worker := self.workers.get(device):
            self.store.registry.renew(device, worker.holder, lease_s=30)

    @rule(device=st.sampled_from(DEVICES))
    def lease_lapses(self, device: str) -> None:
        """The worker stops heartbeating (killed, partitioned): its lease expires."""
        self.r.delete(self.k.lease(device))

    @rule(device=st.sampled_from(DEVICES))
    def worker_replaced(self, device: str) -> None:
        """The worker dies, its lease lapses, a new process registers for the device, and
        the scheduler's sweep comes by."""
        self.r.delete(self.k.lease(device))
        self._register(device)
        self.release_lapsed()

    @rule(device=st.sampled_from(DEVICES))
    def deregister(self, device: str) -> None:
        if worker := self.workers.pop(device, None):
            self.store.registry.deregister(device, worker.holder, keep_s=0)
            self.retired.append(worker)  # gone; a run it was running still names its token

    @rule(device=st.sampled_from(DEVICES))
    def recover(self, device: str) -> None:
        if self.r.exists(self.k.device(device)):
            self.store.registry.recover(device)

    # -- the API and the scheduler -----------------------------------------------------------

    def _record(self, priority: int) -> RunRecord:
        self.now += 1
        return RunRecord(
            id=f"r{next(self.ids)}",
            request=GoalRunRequest(goal="Sign in"),
            priority=priority,
            submitted_at=self.now,
        )

    def _send(self, run: str, device: str, *, crash: bool) -> None:
        """The scheduler sends a reservation's message, or dies before it does."""
        if crash:
            self.owed.add(run)
        else:
            assert self.dispatcher.deliver(run, device)

    @rule(
        target=runs,
        device=st.none() | st.sampled_from(DEVICES),
        priority=st.integers(0, 2),
        crash=st.booleans(),
    )
    def submit(self, device: str | None, priority: int, crash: bool) -> str:  # noqa: FBT001 - hypothesis draws it
        run = self._record(priority)
        out = self.store.submit_one(run, idem=None, max_pending=0, device=device)
        if out.kind == "reserved" and device is not None:
            self._send(run.id, device, crash=crash)
        return run.id

    @rule(target=runs, n=st.integers(1, 3))
    def submit_many(self, n: int) -> object:
        records = [self._record(0) for _ in range(n)]
        self.store.create(records)
        return multiple(*[r.id for r in records])

    @rule(run=runs, device=st.sampled_from(DEVICES), crash=st.booleans())
    def reserve(self, run: str, device: str, crash: bool) -> None:  # noqa: FBT001 - hypothesis draws it
        """A reservation of any run for any device (most are refused)."""
        self._reserve(run, device, crash=crash)

    def _reserve(self, run: str, device: str, *, crash: bool = False) -> None:
        if self.store.reserve(run, device) is not None:
            self._send(run, device, crash=crash)

    @precondition(lambda self: self.r.zcard(self.k.pending) > 0)
    @rule(device=st.sampled_from(DEVICES), crash=st.booleans())
    def dispatch(self, device: str, crash: bool) -> None:  # noqa: FBT001 - hypothesis draws it
        """The scheduler gives the first pending run to `device`."""
        for run in self.store.pending_ids(limit=1):
            self._reserve(run, device, crash=crash)

    @rule(run=runs, device=st.sampled_from(DEVICES))
    def resend(self, run: str, device: str) -> None:
        """The scheduler sends an unclaimed reservation's message again (maybe a stale view)."""
        if self.store.resend(run, device):
            self.dispatcher.deliver(run, device)

    @rule()
    def orphan_sweep(self) -> None:
        """The scheduler's sweep of reservations never claimed (every one is due here): one
        whose device is alive is sent again, one whose device is gone or down is pending
        again. After it, no reserved run is without its message."""
        self.dispatcher.view.reload()
        self.dispatcher.sweep()
        self.owed.clear()
        queued = set(self.enq.sent)
        for run_id in self._index(self.k.reserved):
            device = cast("str", self.r.hget(self.k.run(run_id), "device"))
            assert (run_id, device) in queued, f"swept, yet reserved {run_id} has no message"

    @rule(run=runs)
    def unreserve(self, run: str) -> None:
        """The scheduler gives back a reservation whose device is down."""
        record = self.store.load(run)
        if record is not None and record.device:
            self.store.unreserve(record, record.device)

    @rule(run=runs)
    def release_stray(self, run: str) -> None:
        if (record := self.store.load(run)) is not None:
            self.store.release_stray(record)

    @rule(run=runs)
    def cancel(self, run: str) -> None:
        self.store.cancel(run)

    @rule(run=runs)
    def expire_unplaceable(self, run: str) -> None:
        self.store.expire_unplaceable(run, after_s=1)

    @rule()
    def release_lapsed(self) -> None:
        """The scheduler's sweep re-pends exactly the running runs whose claiming worker no
        longer holds the device's lease (none, or another's), attempts counted."""
        runs, _ = self._all()
        lost = set()
        for rid, run in runs.items():
            lease, holder = self.r.get(self.k.lease(run["device"] or "-")), run.get("holder")
            if run["status"] == "running" and (lease is None or (holder and lease != holder)):
                lost.add(rid)
        assert {rid for rid, _ in self.store.release_lapsed()} == lost
        for rid in lost:
            after = cast("dict[str, str]", self.r.hgetall(self.k.run(rid)))
            assert (after["status"], after["device"]) == ("queued", ""), (rid, after)
            assert after["attempt"] == runs[rid]["attempt"], rid

    @rule(run=runs)
    def end_overdue(self, run: str) -> None:
        record = self.store.load(run)
        if record is not None and record.status is RunStatus.RUNNING:
            self.store.end_overdue(record, "overdue")

    # -- the workers ---------------------------------------------------------------------------

    def _queued_device(self, i: int) -> str:
        """The device of one of the queued messages, picked by `i`."""
        sent = self.enq.sent
        return sent[i % len(sent)][1]

    @precondition(lambda self: self.r.llen(self.enq.key) > 0)
    @rule(i=st.integers(0, 3), then=THEN)
    def deliver(self, i: int, then: tuple[str, ...]) -> None:
        """The oldest message queued for a device is taken off the queue (at most once) by
        its worker, which claims the run (a duplicate or stale one is skipped) and goes on as
        `then` says. A message its worker cannot use (the lease is gone) is spent: the
        sweeps own that run now."""
        device = self._queued_device(i)
        run = self.enq.take(device)
        if run is None:
            return
        if self._claim(run, device):
            self.act(device=device, latest=True, then=then)
        elif self.r.hget(self.k.run(run), "device") == device:
            self.owed.add(run)

    @precondition(lambda self: self.r.llen(self.enq.key) > 0)
    @rule(i=st.integers(0, 3))
    def message_lost(self, i: int) -> None:
        """The worker process that took a device's oldest message dies before claiming it:
        the message is gone with it, and so are its heartbeat and lease (a new process must
        register for the device)."""
        device = self._queued_device(i)
        run = self.enq.take(device)
        self.r.delete(self.k.lease(device))
        if (dead := self.workers.pop(device, None)) is not None:
            self.retired.append(dead)
        if run is not None:
            self.owed.add(run)

    @rule(run=runs, device=st.sampled_from(DEVICES))
    def claim(self, run: str, device: str) -> None:
        """A message of `run` is delivered to `device`'s worker (maybe a stale one)."""
        self._claim(run, device)

    def _claim(self, run: str, device: str) -> bool:
        worker = self.workers.get(device)
        if worker is None:
            return False
        try:
            claim = self.rs.claim(run, device, f"w@{device}", cap=3, fence=worker.fence())
        except LeaseLostError:  # the worker stands aside (`tasks._stand_aside`): the run back
            record = self.store.load(run)
            if record is not None:
                self.rs.hand_back(record, device, "", holder=worker.holder)
            return False
        if claim.token and claim.record is not None:
            worker.claims[run] = claim.token
            self.holders[claim.token] = worker.holder
            return True
        return False

    @precondition(lambda self: any(w.claims for w in self.workers.values()))
    @rule(device=st.sampled_from(DEVICES), latest=st.booleans(), then=THEN)
    def act(self, *, device: str, latest: bool, then: tuple[str, ...]) -> None:
        """`device`'s worker goes on with its latest claim (or its oldest: maybe one the fleet
        has moved on from, as a zombie execution would): a step, then the run's end, a
        question for a person or a hand back."""
        if (worker := self.workers.get(device)) is not None and worker.claims:
            self._act(worker, latest=latest, then=then)

    @precondition(lambda self: any(w.claims for w in self.retired))
    @rule(i=st.integers(0, 5), then=THEN)
    def zombie_acts(self, i: int, then: tuple[str, ...]) -> None:
        """A worker process that was replaced (its lease lapsed, another process took the
        device) or deregistered goes on with a claim it held: every fenced write of it (step,
        finish, park) is refused."""
        zombies = [w for w in self.retired if w.claims]
        zombie = zombies[i % len(zombies)]
        assert not self._act(zombie, latest=False, then=then) or then[0] == "hand_back"

    def _act(self, worker: Worker, *, latest: bool, then: tuple[str, ...]) -> bool:  # noqa: PLR0911 - one return per action a worker takes
        """Whether the worker's write went through (False: refused, or nothing to do)."""
        run = list(worker.claims)[-1 if latest else 0]
        token = worker.claims[run]
        record = self.store.load(run)
        if record is None:
            return False
        kind, *how = then
        if kind == "child_dies":
            return self._child_dies(worker, run)
        fence = worker.fence()
        with contextlib.suppress(LeaseLostError, ClaimLostError):
            if kind == "step":
                row = StepRow(
                    index=1,
                    refs_generation="s1",
                    candidates=0,
                    screen="Sign in",
                    outcome=Outcome.ACTED,
                )
                self.rs.write_step(run, token, row, fence=fence)
                return True
            if kind == "finish":
                status, failure = RunStatus(how[0]), Failure(how[1])
                result = RunResult(status=status, goal="Sign in", run_id=run)
                return self.rs.finish(
                    record,
                    token,
                    result,
                    failure=failure,
                    quarantine_after=1,
                    retention_s=0,
                    fence=fence,
                )
            if kind == "park":
                question = self._question(record, worker.device, ttl=float(how[0]))
                result = RunResult(status=RunStatus.ESCALATED, goal="Sign in", run_id=run)
                return bool(self.qs.park(record, token, result, question, fence=fence))
            return self.rs.hand_back(record, worker.device, token)
        return False

    def _child_dies(self, worker: Worker, run: str) -> bool:
        """The pool child running `run` dies (or hits the hard time limit): its claim is gone
        with it, and the worker's main process sends the run to its device again while it
        holds the lease (`send_again`); the next delivery claims it again, attempt + 1."""
        del worker.claims[run]
        lease = self.k.lease(worker.device)
        return send_again(
            lambda r, d: self.enq.send_all([(r, d)]),
            run,
            worker.device,
            give_up=lambda: self.r.get(lease) != worker.holder,
        )

    def _question(self, record: RunRecord, device: str, *, ttl: float) -> Question:
        screen = DecideState(
            goal="Sign in",
            step=1,
            candidates=(Candidate(ref="e1", kind=Kind.BUTTON, name="Next"),),
            context=(),
            input_names=(),
            screen="Choose",
        )
        return Question(
            run_id=record.id,
            goal="Sign in",
            step=1,
            screen=screen,
            reason="unsure",
            decider="rules",
            device=device,
            asked_at=self.now,
            deadline=self.now + ttl,
        )

    @rule(run=runs)
    def hand_back_reserved(self, run: str) -> None:
        """A worker shutting down hands back a reservation it never claimed."""
        record = self.store.load(run)
        if record is not None and record.device:
            self.rs.hand_back(record, record.device, "")

    @rule(
        run=runs,
        answer=st.sampled_from([Answer(target="Next"), Answer(done=True), Answer(blocked=True)]),
    )
    def answer(self, run: str, answer: Answer) -> None:
        who = f"ops-{next(self.ids)}"
        try:
            self.qs.answer(run, answer, who=who)
        except NotAwaitingError:
            return
        self.attempts.pop(run, None)  # a person's answer queues it afresh
        if not answer.blocked:
            self.taught = who  # the screen's entry is this answer's (every question's screen)

    @rule()
    def expire_questions(self) -> None:
        self.qs.expire()

    @rule(run=runs)
    def cancel_parked(self, run: str) -> None:
        self.qs.cancel(run)

    # -- invariants --------------------------------------------------------------------------

    def _all(self) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
        runs: dict[str, dict[str, str]] = {}
        for key in cast("list[str]", list(self.r.scan_iter(match=self.k.run("*")))):
            if not key.endswith(":steps"):
                runs[key.removeprefix(self.k.run(""))] = cast("dict[str, str]", self.r.hgetall(key))
        devices = {
            d: cast("dict[str, str]", self.r.hgetall(self.k.device(d)))
            for d in DEVICES
            if self.r.exists(self.k.device(d))
        }
        return runs, devices

    def _index(self, key: str) -> set[str]:
        return set(cast("list[str]", self.r.zrange(key, 0, -1)))

    @invariant()
    def the_machine_holds(self) -> None:
        runs, devices = self._all()
        pending, reserved = self._index(self.k.pending), self._index(self.k.reserved)
        running, questions = self._index(self.k.running), self._index(self.k.questions)
        held = {d: h.get("run", "") for d, h in devices.items() if h.get("run")}
        claimed_by = self.holders

        for d, run_id in held.items():
            assert run_id in runs, f"device {d} holds run {run_id}, which does not exist"
            run = runs[run_id]
            assert run["status"] in {"queued", "running"}, (d, run_id, run["status"])
            assert run["device"] == d, f"device {d} holds {run_id}, reserved for {run['device']}"
            if run["status"] == "queued":
                assert devices[d].get("quarantined") != "1", f"quarantined {d} was reserved"

        for run_id, run in runs.items():
            status, device = run["status"], run.get("device", "")
            where = {n for n, s in (("pending", pending), ("reserved", reserved)) if run_id in s}
            if status == "queued":
                assert where == ({"reserved"} if device else {"pending"}), (run_id, device, where)
                if device:
                    assert held.get(device) == run_id, f"{run_id} reserved, {device} not holding"
            elif status == "running":
                assert not where, (run_id, where)
                assert run_id in running, f"running {run_id} not in the running index"
                assert held.get(device) == run_id, f"running {run_id}, {device} not holding"
                assert run.get("holder") == claimed_by[run["claim"]], f"{run_id}: claim's holder"
            else:
                assert not where, (run_id, status, where)
                assert run_id not in running, (run_id, status)
                assert run_id not in held.values(), f"{status} {run_id} still holds a device"
            if status == "awaiting_answer":
                assert run_id in questions
                assert self.r.exists(self.k.question(run_id))
            else:
                assert run_id not in questions, (run_id, status)
            attempt = int(run.get("attempt") or 0)
            assert attempt >= self.attempts.get(run_id, 0), f"{run_id}'s attempts decreased"
            self.attempts[run_id] = attempt

        listed = self._index(self.k.runs)
        assert listed == runs.keys(), "the run list is every run"
        by_end = {s.value: self._index(self.k.ended(s)) for s in RunStatus if s.terminal}
        for run_id, run in runs.items():
            ended = {status for status, ids in by_end.items() if run_id in ids}
            terminal = RunStatus(run["status"]).terminal
            assert ended == ({run["status"]} if terminal else set()), (run_id, ended)
        terminal_runs = {i for i, run in runs.items() if RunStatus(run["status"]).terminal}
        assert self._index(self.k.history_outbox) == terminal_runs, "the outbox is every end"

        for name, index in (("pending", pending), ("reserved", reserved)):
            assert index <= runs.keys(), f"{name} names runs that do not exist"
        assert running <= runs.keys()
        assert questions <= runs.keys()

    @invariant()
    def memory_holds_the_last_answer_taken(self) -> None:
        """Only an answer taken writes the memory (a refused one leaves no trace)."""
        entries = self.memory.entries()
        assert [e.origin for e in entries] == ([self.taught] if self.taught else [])

    @invariant()
    def no_run_is_stranded(self) -> None:
        """Every reserved run has its message queued, or the orphan sweep owes it one; every
        running run is executed by its device's current worker, or has its message queued
        again, or has lost its lease (the lapsed sweep re-pends it)."""
        runs, _ = self._all()
        queued = set(self.enq.sent)
        for run_id in self._index(self.k.reserved):
            device = runs[run_id]["device"]
            assert (run_id, device) in queued or run_id in self.owed, (
                f"reserved {run_id}: no message for {device}, none owed"
            )
        for run_id in self._index(self.k.running):
            run = runs[run_id]
            device, holder = run["device"], run.get("holder", "")
            worker = self.workers.get(device)
            executing = worker is not None and worker.claims.get(run_id) == run["claim"]
            lapsed = self.r.get(self.k.lease(device)) != holder
            assert executing or (run_id, device) in queued or lapsed, (
                f"running {run_id} on {device}: no execution, no message, its lease held"
            )


def test_the_run_and_device_state_machine(client: redis.Redis) -> None:
    run_state_machine_as_test(
        lambda: FleetMachine(client),
        settings=settings(
            max_examples=150,
            stateful_step_count=50,
            deadline=None,
            # no explain phase: its line tracer makes a failing case's shrink minutes long
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
