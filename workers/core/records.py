"""What the fleet stores about runs, devices and batches, and how each maps to a Redis hash.

Scalars are stored as strings; nested models as JSON. Every record round-trips through
`to_hash` / `from_hash`, so the key layout (`workers.fleet.keys`) and the fields stay in one place.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from workers.core.bounds import MAX_LABEL_CHARS, MAX_LABELS
from workers.core.model import Attempt, DecideState, Platform, RunResult, RunStatus
from workers.core.request import GoalRunRequest

DEVICE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
LABEL_KEY_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")


def _s(raw: dict[str, str], key: str) -> str | None:
    v = raw.get(key, "")
    return v or None


def _f(raw: dict[str, str], key: str) -> float | None:
    v = raw.get(key, "")
    return float(v) if v else None


class Selector(BaseModel):
    """Which devices a run may go to. Every given field must match; labels all must match."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    platform: Platform | None = None
    os_version: Annotated[str, Field(min_length=1, max_length=40)] | None = None
    """Exact match, or a prefix ending in `*` (e.g. `17.*`)."""
    labels: dict[
        Annotated[str, Field(pattern=LABEL_KEY_PATTERN.pattern)],
        Annotated[str, Field(max_length=MAX_LABEL_CHARS)],
    ] = Field(default_factory=dict, max_length=MAX_LABELS)

    def matches(self, device: DeviceInfo) -> bool:
        if self.platform is not None and device.platform is not self.platform:
            return False
        if self.os_version is not None:
            want = self.os_version
            if want.endswith("*"):
                if not device.os_version.startswith(want[:-1]):
                    return False
            elif device.os_version != want:
                return False
        return all(device.labels.get(k) == v for k, v in self.labels.items())


class DeviceInfo(BaseModel):
    """A device's capabilities, as its worker registers them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, Field(pattern=DEVICE_ID_PATTERN.pattern)]
    platform: Platform
    os_version: str = ""
    model: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    backend: str = "sim"


class DeviceState(BaseModel):
    """A registered device as the scheduler sees it: capabilities plus health and load."""

    model_config = ConfigDict(frozen=True)

    info: DeviceInfo
    alive: bool
    """The worker's heartbeat lease is current."""
    worker: str | None = None
    run: str | None = None
    """The run reserved for or running on this device (busy when set)."""
    quarantined: bool = False
    quarantine_reason: str = ""
    infra_failures: int = 0
    """Consecutive `errored` runs (infrastructure); resets on any other outcome."""
    decision_failures: int = 0
    """Consecutive blocked / escalated / max-steps runs; informational, never quarantines."""
    runs_total: int = 0
    registered_at: float | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def busy(self) -> bool:
        return self.run is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def idle(self) -> bool:
        return self.alive and not self.busy and not self.quarantined

    @classmethod
    def from_hash(cls, raw: dict[str, str], *, alive: bool) -> DeviceState:
        return cls(
            info=DeviceInfo.model_validate_json(raw["info"]),
            alive=alive,
            worker=_s(raw, "worker"),
            run=_s(raw, "run"),
            quarantined=raw.get("quarantined", "0") == "1",
            quarantine_reason=raw.get("quarantine_reason", ""),
            infra_failures=int(raw.get("infra_failures", "0") or 0),
            decision_failures=int(raw.get("decision_failures", "0") or 0),
            runs_total=int(raw.get("runs_total", "0") or 0),
            registered_at=_f(raw, "registered_at"),
        )


class RunRecord(BaseModel):
    """One run, from submit to its final `RunResult`."""

    model_config = ConfigDict(frozen=True)

    id: str
    request: GoalRunRequest
    status: RunStatus = RunStatus.QUEUED
    target: str | None = None
    """The exact device asked for, if any."""
    selector: Selector | None = None
    device: str | None = None
    """The device the run was dispatched to (None while pending)."""
    batch: str | None = None
    priority: int = 0
    attempt: int = 0
    worker: str | None = None
    submitted_at: float
    dispatched_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    reason: str = ""
    result: RunResult | None = None
    cancel_requested: bool = False
    schedule: str | None = None
    owner: str | None = None
    """The name of the token that submitted it (`workers.core.access`); None for a run
    recorded before owners were."""
    suite: str | None = None
    """The suite whose batch this run is in (a flows file's `suite`), if any."""
    flow: str | None = None
    """The suite flow this run is an attempt of (a flows file's `name`), if any."""
    retries: int = 0
    """How many more attempts a failure of this one brings (`lua/lib/retry.lua`)."""
    retry: int = 0
    """Which attempt of its flow on its device this is: 0 the first, 1 the first retry."""
    retry_of: str | None = None
    """The attempt before this one."""

    ASKED: ClassVar[tuple[str, ...]] = (
        "request", "target", "selector", "batch", "priority", "schedule", "owner", "suite",
        "flow",
    )  # fmt: skip
    """The hash fields of what was asked for, which a retry's next attempt copies, and only
    these (`lua/lib/retry.lua`, through the scripts' prelude). Every other field is the
    attempt's own: the retry writes the next attempt's `id`, `status`, `submitted_at`,
    `retries`, `retry` and `retry_of`, and leaves the rest at their defaults (absent)."""
    ATTEMPT: ClassVar[tuple[str, ...]] = (
        "id", "status", "device", "worker", "attempt", "submitted_at", "dispatched_at",
        "started_at", "finished_at", "reason", "result", "cancel_requested", "retries",
        "retry", "retry_of",
    )  # fmt: skip
    """The fields each attempt has of its own; with `ASKED`, every field of the record (a
    test holds the two to the model's fields, so a new field is placed in one of them)."""

    def to_hash(self) -> dict[str, str]:
        out = {
            "id": self.id,
            "request": self.request.model_dump_json(),
            "status": self.status.value,
            "target": self.target or "",
            "selector": self.selector.model_dump_json() if self.selector else "",
            "device": self.device or "",
            "batch": self.batch or "",
            "priority": str(self.priority),
            "attempt": str(self.attempt),
            "worker": self.worker or "",
            "submitted_at": repr(self.submitted_at),
            "reason": self.reason,
            "cancel": "1" if self.cancel_requested else "",
            "schedule": self.schedule or "",
            "owner": self.owner or "",
        }
        # a suite's fields only where they are set: a 1,000-run batch stays as small as it was
        extra = {"suite": self.suite, "flow": self.flow, "retries": self.retries,
                 "retry": self.retry, "retry_of": self.retry_of}  # fmt: skip
        out.update({k: str(v) for k, v in extra.items() if v})
        for name in ("dispatched_at", "started_at", "finished_at"):
            v = getattr(self, name)
            out[name] = "" if v is None else repr(v)
        out["result"] = self.result.model_dump_json() if self.result else ""
        return out

    @staticmethod
    def request_on_batch(raw: dict[str, str]) -> str | None:
        """The batch whose hash holds this run's request, or None when the run's own hash
        does: a batch stores its request once (field `request` of `{p}:batch:{id}`) and its
        runs leave theirs empty. The loader puts it into `raw["request"]` before `from_hash`."""
        return (raw.get("batch") or None) if raw and not raw.get("request") else None

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> RunRecord:
        sel = raw.get("selector", "")
        res = raw.get("result", "")
        return cls(
            id=raw["id"],
            request=GoalRunRequest.model_validate_json(raw["request"]),
            status=RunStatus(raw.get("status", "queued")),
            target=_s(raw, "target"),
            selector=Selector.model_validate_json(sel) if sel else None,
            device=_s(raw, "device"),
            batch=_s(raw, "batch"),
            priority=int(raw.get("priority", "0") or 0),
            attempt=int(raw.get("attempt", "0") or 0),
            worker=_s(raw, "worker"),
            submitted_at=float(raw["submitted_at"]),
            dispatched_at=_f(raw, "dispatched_at"),
            started_at=_f(raw, "started_at"),
            finished_at=_f(raw, "finished_at"),
            reason=raw.get("reason", ""),
            result=RunResult.model_validate_json(res) if res else None,
            cancel_requested=raw.get("cancel", "") == "1",
            schedule=_s(raw, "schedule"),
            suite=_s(raw, "suite"),
            flow=_s(raw, "flow"),
            retries=int(raw.get("retries", "0") or 0),
            retry=int(raw.get("retry", "0") or 0),
            retry_of=_s(raw, "retry_of"),
            owner=_s(raw, "owner"),
        )


class BatchRecord(BaseModel):
    """A fan-out: its runs and how many ended in each status (counted in our store)."""

    model_config = ConfigDict(frozen=True)

    id: str
    total: int
    finished: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    created_at: float
    goal: str = ""
    runs: tuple[str, ...] = ()
    suite: str | None = None
    """The flows file's suite name, for a batch a suite submitted."""
    owner: str | None = None
    """Who submitted it (as `RunRecord.owner`)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        return self.finished >= self.total

    @classmethod
    def from_hash(cls, raw: dict[str, str], runs: list[str]) -> BatchRecord:
        counts = {k[2:]: int(v) for k, v in raw.items() if k.startswith("n:")}
        return cls(
            id=raw["id"],
            total=int(raw["total"]),
            finished=int(raw.get("finished", "0") or 0),
            counts=counts,
            created_at=float(raw["created_at"]),
            goal=raw.get("goal", ""),
            runs=tuple(runs),
            suite=raw.get("suite") or None,
            owner=_s(raw, "owner"),
        )


def dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


class Question(BaseModel):
    """What a person is asked about a parked run: the screen as the deciders saw it (names and
    texts only: never a typed or secret value), the goal, the history and what each decider
    said. Answered by naming a candidate (or done / blocked)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    goal: str
    step: int
    screen: DecideState
    attempts: tuple[Attempt, ...] = ()
    reason: str
    decider: str
    """The run's decider spec: the decision memory keys the answer by it."""
    platform: Platform | None = None
    device: str = ""
    asked_at: float
    deadline: float


class Answer(BaseModel):
    """A person's answer: a candidate by its name, or by its ref, or done, or blocked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    ref: Annotated[str, Field(pattern=r"^e[0-9]{1,6}$")] | None = None
    done: bool = False
    blocked: bool = False

    @model_validator(mode="after")
    def _one(self) -> Self:
        given = (self.target is not None) + (self.ref is not None) + self.done + self.blocked
        if given != 1:
            raise ValueError("answer with exactly one of target, ref, done or blocked")
        return self
