"""The data model of a goal run: what a device shows, what a decider says, what a run records.

Everything here is a pydantic v2 model so step rows and results round-trip as JSON.
Sensitive input values are `SecretStr` and only ever leave this module as `**********`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from workers.core.app import AppUnderTest
from workers.core.inputs import INPUT_NAME_PATTERN, MIN_SCRUB_CHARS, Inputs, InputValue
from workers.core.screen import (
    REF_PATTERN,
    Candidate,
    Kind,
    Node,
    Platform,
    Snapshot,
    fingerprint,
    pin_ref,
)

__all__ = [  # the screen's and the inputs' types live in workers.core.screen and .inputs
    "INPUT_NAME_PATTERN",
    "MIN_SCRUB_CHARS",
    "NONE",
    "REF_PATTERN",
    "Candidate",
    "InputValue",
    "Inputs",
    "Kind",
    "Node",
    "Platform",
    "Snapshot",
    "fingerprint",
    "pin_ref",
]

PROVIDER_SPEC = re.compile(r"^(?P<provider>[a-z][a-z0-9_-]*)/(?P<model>[A-Za-z0-9][\w.:/@-]*)$")
"""`<provider>/<model>`, e.g. `openai/gpt-4o-mini` (see `workers.decide.factory`)."""
NONE = "none"
"""The literal a decider answers when no ref (or no input) applies."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TokenUsage(_Frozen):
    input_tokens: int = 0
    """Prompt tokens as the provider billed them (0 where it reports none)."""
    output_tokens: int = 0
    counted_input_tokens: int = 0
    """Ours: the request body (messages + schema) counted offline with cl100k, an upper bound
    that does not depend on how a provider renders tools (`workers.decide.tokens`)."""
    requests: int = 0
    """Model requests this took (re-asks and a self-report fallback included); 0 for a
    decider that calls no model."""
    cost: float = 0.0
    """What these tokens cost by the operator's price table (`workers.core.cost`); 0 where
    the model has no price there, or no model was called."""

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            counted_input_tokens=self.counted_input_tokens + other.counted_input_tokens,
            requests=self.requests + other.requests,
            cost=self.cost + other.cost,
        )


DecidedBy = Literal["", "rules", "scripted", "model", "memory", "human"]
"""Who made a decision ("" where the decider does not say)."""
ConfidenceSource = Literal["", "self", "logprobs", "rules", "scripted", "memory", "human"]
"""Where `confidence` came from: the model's self-report, the chosen answer's token
log-probability, a rule's fixed score, a script, the decision memory, a person."""


class RankedCandidate(_Frozen):
    """A candidate as a decider weighed it: its ref and the decider's confidence in it."""

    ref: str
    confidence: float = Field(ge=0.0, le=1.0)


MAX_RANKED = 5
"""The most candidates a decision or a failure report lists as ranked."""


class Decision(_Frozen):
    """The decider's one answer for one step."""

    target: str = NONE
    """A ref on this screen, or "none"."""
    input: str = NONE
    """The input name to type into `target` when it is a text field, or "none"."""
    done: bool = False
    blocked: bool = False
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    reason: str = Field(default="", max_length=200)
    usage: TokenUsage = TokenUsage()
    decided_by: DecidedBy = ""
    confidence_source: ConfidenceSource = ""
    ranked: tuple[RankedCandidate, ...] = Field(default=(), max_length=MAX_RANKED)
    """The candidates this decider weighed, best first, with its confidence in each (the rules
    decider's scores); empty where a decider reports only its answer."""


class DecideState(_Frozen):
    """Everything a decider is told about one step."""

    goal: str
    step: int
    candidates: tuple[Candidate, ...]
    context: tuple[str, ...]
    input_names: tuple[str, ...]
    used_inputs: tuple[str, ...] = ()
    """Inputs already typed in this run (a hint; the decider may reuse one)."""
    history: tuple[str, ...] = ()
    """Short lines about earlier steps, newest last (at most a few)."""
    futile: tuple[str, ...] = ()
    """Refs pressed on this screen, as it looks now, that changed nothing: choose another
    (`workers.core.repeats`)."""
    done_when: str | None = None
    screen: str = ""


class ActionResult(_Frozen):
    """What a pinned press/fill with settle reported back."""

    changed: bool
    """Whether the settle diff shows anything added or removed (or a value change)."""
    settled: bool = True
    settle_skipped: bool = False
    """The device read the effect from the snapshots that followed instead of waiting its
    settle window out: it took the remembered-action hint (`DevicePort.expect_known_screen`)."""
    additions: int = 0
    removals: int = 0
    refs_generation: str = ""
    added_refs: tuple[str, ...] = ()


class ActionKind(StrEnum):
    PRESS = "press"
    FILL = "fill"
    # a journey's device actions (`workers.core.journey`): no ref, `Action.ref` is ""
    SCROLL = "scroll"
    BACK = "back"
    LAUNCH = "launch"
    RELAUNCH = "relaunch"
    OPEN = "open"
    SUBMIT = "submit"
    WAIT = "wait"


class RunStatus(StrEnum):
    """How a goal run ended (or where it is)."""

    QUEUED = "queued"  # accepted, waiting for its device
    RUNNING = "running"  # claimed by a worker, steps under way
    DONE = "done"  # the goal was reached
    BLOCKED = "blocked"  # the decider (or the unproductive-step guard) says it cannot progress
    ESCALATED = "escalated"  # the decider was not confident enough; a human should look
    MAX_STEPS = "max-steps"  # the step budget ran out
    ERRORED = "errored"  # infrastructure failed (device, model transport, worker)
    CANCELLED = "cancelled"  # the caller cancelled it
    OVER_BUDGET = "over-budget"  # the next model call would have crossed its token/cost budget
    AWAITING_ANSWER = "awaiting_answer"  # escalated to a person; parked, its device released
    UNPLACEABLE = "unplaceable"  # no device could take it (none registered; or all down past
    # its device_wait_s); expired unplaced

    @property
    def terminal(self) -> bool:
        return self not in {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AWAITING_ANSWER}


class Outcome(StrEnum):
    """What one step came to."""

    ACTED = "acted"  # an action changed the screen
    UNPRODUCTIVE = "unproductive"  # an action changed nothing
    DONE = "done"
    BLOCKED = "blocked"
    ESCALATED = "escalated"
    STALE = "stale"  # the ref went stale; re-snapshot and decide again
    ERRORED = "errored"


Direction = Literal["up", "down", "left", "right"]
"""Which way a scroll goes."""


class Action(_Frozen):
    kind: ActionKind
    ref: str
    pinned: str
    input: str | None = None
    shown_value: str | None = None
    """The typed value as it may be shown: the literal for plain inputs, stars for secrets."""
    direction: Direction | None = None
    """A scroll's way (a move or a journey's scroll step)."""

    @property
    def label(self) -> str:
        """What was done, as a table, report or log line names it: `press @e5~s652468`,
        `scroll down`, `back`."""
        return f"{self.kind.value} {self.direction or self.pinned}".rstrip()

    @property
    def shown(self) -> str:
        """`label` with the typed value as it may be shown (`fill @e2~s6 = ***`)."""
        return self.label if self.shown_value is None else f"{self.label} = {self.shown_value}"


StepSource = Literal["", "memory", "model", "rules", "person", "plain"]
"""Who decided a journey row or step: the decision memory, a model (or the scripted decider
standing in for one), the rules (a rules decider, `done_when`, a plain-text check), a person,
or nobody (`plain`: a step that needs no decider)."""


MemorySource = Literal["model", "rules", "scripted", "human"]
MemoryOutcome = Literal["hit", "miss", "invalidated"]


class MemoryNote(_Frozen):
    """What the decision memory did in one step (`workers.core.memory`)."""

    entry: str
    """The entry's key."""
    outcome: MemoryOutcome
    source: MemorySource | None = None
    """Who made the remembered decision (hits and invalidations)."""
    why: str = ""
    """Why an entry was invalidated: its action changed nothing, or its ref was stale."""


class Attempt(_Frozen):
    """One decider's answer in a step's escalation chain."""

    decider: str
    decision: Decision | None = None
    """None when it gave no valid answer."""
    ms: float = 0.0
    escalated: str = ""
    """Why its answer went up the chain ("" for the answer that was used)."""


class StepRow(_Frozen):
    """One row of a run's step table."""

    index: int
    screen: str
    fingerprint: str = ""
    refs_generation: str
    candidates: int
    decision: Decision | None = None
    action: Action | None = None
    result: ActionResult | None = None
    outcome: Outcome
    error: str | None = None
    snapshot_ms: float = 0.0
    decide_ms: float = 0.0
    action_ms: float = 0.0
    memory: MemoryNote | None = None
    attempts: tuple[Attempt, ...] = ()
    """Every decider asked in this step, when the run has a chain of them."""
    seen: DecideState | None = None
    """What the decider was asked (scrubbed: no typed or secret value); None when no decider
    was asked (done_when, a failed snapshot)."""
    screenshot: str | None = None
    """The artifact id (sha256 hex) of the step's picture: the screen the decider saw, secrets
    masked, the acted element marked (`workers.core.shots`)."""
    screenshot_note: str = ""
    """Why the step has no picture ("" when it has one or none was asked for)."""
    screenshot_ms: float = 0.0
    app: AppUnderTest | None = None  # the app the run drove (`workers.core.app`)
    journey_step: int = 0
    """The journey step this row belongs to (1-based; 0: a one-goal run)."""
    journey_name: str = ""
    """That step's title (`JourneyStep.title`)."""
    source: StepSource = ""
    """Who decided this row (a journey's rows; "" in a one-goal run)."""


class JourneyStepResult(_Frozen):
    """How one journey step went (`RunResult.journey`)."""

    index: int
    title: str
    kind: str
    passed: bool | None = None
    """None: not reached (an earlier step did not pass)."""
    why: str = ""
    source: StepSource = ""
    rows: int = 0
    decider_calls: int = 0
    """Rows decided by a model (memory, rules, a person and plain steps are not counted)."""
    ms: float = 0.0


class ErrorInfo(_Frozen):
    type: str
    code: str = ""
    message: str
    device_fault: bool = False
    """The failure counts against the device (its own error, or a run that hung on it)."""


class PhaseTotals(_Frozen):
    snapshot_ms: float = 0.0
    decide_ms: float = 0.0
    action_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    """The run's model calls priced by the operator's table (`workers.core.cost`)."""


class Ranking(_Frozen):
    """One decider's answer on a step, and the candidates it ranked (`FailureReport`)."""

    step: int
    decider: str
    answer: str
    """What it said: a ref and the candidate's name, `done`, `blocked`, or `no valid answer`."""
    candidates: tuple[tuple[str, str, float], ...] = ()
    """(ref, name, confidence) best first: its ranking, else its one answer."""
    escalated: str = ""
    """Why its answer went up the chain ("" for the answer that was used)."""


class Refusal(_Frozen):
    """A claim or choice the loop's checks refused: the evidence check (a done claim the
    screen does not corroborate), a guard, a confidence too low."""

    step: int
    decider: str
    claim: str
    why: str


class FinalScreen(_Frozen):
    """The screen a run that did not end `done` ended on: a fresh snapshot (and picture) taken
    after the end, its texts scrubbed of every input value."""

    screen: str = ""
    fingerprint: str = ""
    candidates: tuple[Candidate, ...] = ()
    context: tuple[str, ...] = ()
    screenshot: str | None = None
    """The picture's artifact id (secrets masked as a step's are)."""
    screenshot_note: str = ""
    error: str = ""
    """Why there is no fresh snapshot (the device failed, or closed)."""


class FailureReport(_Frozen):
    """Why a run did not end `done` (`workers.core.failure`): where it ended, what each
    decider ranked last, what the checks refused, and who was asked in turn."""

    final: FinalScreen
    rankings: tuple[Ranking, ...] = ()
    """The last step a decider was asked on: each decider of its chain, in the order asked."""
    refusals: tuple[Refusal, ...] = ()
    """Every refusal of the run, in step order."""
    escalation: tuple[str, ...] = ()
    """The path the last step took up the chain: each decider asked, and how it ended."""
    command: str = ""
    """The command line that runs it again, where its host knows one (`goalfleet run`'s own);
    else the reader says how to answer or re-run it (`scheduler.suites.failure`)."""


class RunResult(_Frozen):
    """How a goal run ended, with its whole step table."""

    status: RunStatus
    reason: str = ""
    goal: str
    steps: tuple[StepRow, ...] = ()
    error: ErrorInfo | None = None
    totals: PhaseTotals = PhaseTotals()
    duration_ms: float = 0.0
    memory_writes: int = 0
    """Decisions this run added to the decision memory (only a `done` run writes)."""
    run_id: str | None = None
    device_id: str | None = None
    attempt: int = 1
    app: AppUnderTest | None = None  # the app it drove, command and version, and its reset
    journey: tuple[JourneyStepResult, ...] = ()
    """A journey's steps in order, each passed, failed or not reached; the run's status is
    the first that did not pass (its `reason` names it)."""
    failure: FailureReport | None = None
    """Why it did not end `done` (None for a `done` run)."""
    video: str | None = None
    """The artifact id of the run's video (WebM, secrets painted over: `workers.core.video`)."""
    video_note: str = ""
    """Why the run has no video (a device that records none, video off, over its cap)."""
