"""What the store-level dispatch tests share (imported by name, as `storekit`): register a
device as a worker process would, end a run as its worker would, or park it for a person at
an account chooser."""

from __future__ import annotations

import time

from scheduler.store.runs import FleetStore
from workers.core.model import DecideState, Platform, RunResult, RunStatus
from workers.core.records import DeviceInfo, Question, RunRecord
from workers.core.screen import Candidate, Kind
from workers.fleet.keys import lease_holder, worker_name
from workers.fleet.state.questions import QuestionStore
from workers.fleet.state.runs import RunStore
from workers.fleet.state.states import Failure


def register(store: FleetStore, did: str, **labels: str) -> str:
    """Register iOS device `did` with `labels`; returns its lease holder token."""
    info = DeviceInfo(id=did, platform=Platform.IOS, os_version="17.5", labels=labels)
    holder = lease_holder(worker_name(did))
    store.registry.register(info, holder, lease_s=30)
    return holder


def loaded(store: FleetStore, run_id: str) -> RunRecord:
    record = store.load(run_id)
    assert record is not None
    return record


def finish(store: FleetStore, rs: RunStore, run_id: str, did: str) -> None:
    """Claim `run_id` on `did` and end it `done`, freeing the device."""
    claim = rs.claim(run_id, did, f"w@{did}", cap=3)
    done = RunResult(status=RunStatus.DONE, goal="g")
    assert rs.finish(
        loaded(store, run_id),
        claim.token,
        done,
        failure=Failure.NONE,
        quarantine_after=3,
        retention_s=60,
    )


CHOOSER = DecideState(
    goal="Sign in",
    step=2,
    candidates=(
        Candidate(ref="e7", kind=Kind.BUTTON, name="Continue as ada"),
        Candidate(ref="e8", kind=Kind.BUTTON, name="Use another account"),
    ),
    context=(),
    input_names=("email",),
    screen="Choose an account",
)
"""The screen of a parked run's question: two accounts, which the rules cannot tell apart."""


def park(questions: QuestionStore, record: RunRecord, token: str) -> None:
    """Park `record`, claimed with `token` on its device, for a person at `CHOOSER`."""
    now = time.time()
    question = Question(
        run_id=record.id, goal="Sign in", step=2, screen=CHOOSER, reason="two accounts",
        decider="rules", platform=Platform.IOS, device=record.device or "", asked_at=now,
        deadline=now + 600,
    )  # fmt: skip
    waiting = RunResult(status=RunStatus.ESCALATED, goal="Sign in", run_id=record.id)
    assert questions.park(record, token, waiting, question) == 1
