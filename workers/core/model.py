"""The data model of a goal run: what a device shows, what a decider says, what a run records.

Everything here is a pydantic v2 model so step rows and results round-trip as JSON.
Sensitive input values are `SecretStr` and only ever leave this module as `**********`.
"""

from __future__ import annotations

import collections
import functools
import operator
import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from workers.core.app import AppUnderTest
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

__all__ = [  # the screen's types live in workers.core.screen and are importable from here
    "NONE",
    "REF_PATTERN",
    "Candidate",
    "Kind",
    "Node",
    "Platform",
    "Snapshot",
    "fingerprint",
    "pin_ref",
]

PROVIDER_SPEC = re.compile(r"^(?P<provider>[a-z][a-z0-9_-]*)/(?P<model>[A-Za-z0-9][\w.:/@-]*)$")
"""`<provider>/<model>`, e.g. `openai/gpt-4o-mini` (see `workers.decide.factory`)."""
INPUT_NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")
NONE = "none"
"""The literal a decider answers when no ref (or no input) applies."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


MIN_SCRUB_CHARS = 3
"""Shorter values are not scrubbed from screen texts: they occur by chance everywhere."""
_VALUE = operator.attrgetter("value")


class InputValue(BaseModel):
    """One caller-supplied input: a name the decider sees and a value it never does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    value: SecretStr
    sensitive: bool = False
    plain_field: bool = False
    """A secret the caller allows into a plain text field (a one-time code: OTP fields are
    almost never secure fields). Still redacted everywhere, as every secret is."""

    @field_validator("name")
    @classmethod
    def _name_shape(cls, v: str) -> str:
        if not INPUT_NAME_PATTERN.fullmatch(v):
            raise ValueError(
                "input name must start with a letter and hold only letters, digits and _ "
                "(at most 40 characters), e.g. 'email' or 'password'"
            )
        return v

    def reveal(self) -> str:
        """The literal value. Only device adapters call this, at the moment of typing."""
        return self.value.get_secret_value()

    def shown(self) -> str:
        """What logs and step rows may show of the value."""
        return "**********" if self.sensitive else self.value.get_secret_value()


class Inputs(BaseModel):
    """The caller's inputs by name. The decider sees `names()` only."""

    model_config = ConfigDict(frozen=True)

    values: tuple[InputValue, ...] = ()

    @classmethod
    def of(
        cls,
        plain: dict[str, str] | None = None,
        secret: dict[str, str] | None = None,
        *,
        plain_fields: frozenset[str] = frozenset(),
    ) -> Inputs:
        """`plain_fields`: the secrets the caller allows into a plain text field."""
        vals = [InputValue(name=k, value=SecretStr(v)) for k, v in (plain or {}).items()]
        vals += [
            InputValue(name=k, value=SecretStr(v), sensitive=True, plain_field=k in plain_fields)
            for k, v in (secret or {}).items()
        ]
        counts = collections.Counter(v.name for v in vals)  # linear: 100k names stay cheap
        dupes = sorted(name for name, n in counts.items() if n > 1)
        if dupes:
            raise ValueError(f"input {dupes[0]!r} is given twice; give each input name once")
        return cls(values=tuple(vals))

    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.values)

    @functools.cached_property
    def _replacements(self) -> list[tuple[str, str]]:
        """(value, "{name}") for every value worth scrubbing, longest first (once per run:
        the inputs never change)."""
        pairs = [(v.reveal(), "{" + v.name + "}") for v in self.values]
        return sorted(
            ((value, name) for value, name in pairs if len(value) >= MIN_SCRUB_CHARS),
            key=lambda pair: -len(pair[0]),
        )

    def scrub(self, text: str, replacements: list[tuple[str, str]] | None = None) -> str:
        """`text` with every supplied value of 3+ characters replaced by `{name}`: a screen
        that shows what was typed ("Hi ada@example.com") reaches no decider, prompt, step
        row or memory key with the value in it."""
        for value, name in self._replacements if replacements is None else replacements:
            if value in text:
                text = text.replace(value, name)
        return text

    def scrub_row(self, row: StepRow) -> StepRow:
        """`row` with every text field scrubbed (`scrub`): the screen's name, the reasons, the
        errors, a fill's shown value: a step row names an input, never holds its value.
        A row none of whose texts holds a value comes back as it is (no copy validated)."""
        if not self._replacements:
            return row
        pairs = self._replacements
        changed = False

        def walk(v: object) -> object:
            nonlocal changed
            if isinstance(v, str):
                scrubbed = self.scrub(v, pairs)
                changed = changed or scrubbed != v
                return scrubbed
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            if isinstance(v, list | tuple):
                return [walk(x) for x in v]
            return v

        walked = walk(row.model_dump())
        return StepRow.model_validate(walked) if changed else row

    def scrub_state(self, state: DecideState) -> DecideState:
        """The state with candidate names and context texts scrubbed, and field values
        dropped (a switch's on/off state stays: it is the app's, not the caller's). Only
        what changes is copied: the loop does this every step."""
        pairs = self._replacements
        if not pairs and not any(map(_VALUE, state.candidates)):
            return state  # nothing to scrub, no value to drop
        candidates = []
        for c in state.candidates:
            name = self.scrub(c.name, pairs)
            value = self.scrub(c.value, pairs) if c.kind.stateful else ""
            changed = name != c.name or value != c.value
            candidates.append(c.model_copy(update={"name": name, "value": value}) if changed else c)
        context = tuple(self.scrub(text, pairs) for text in state.context)
        history = tuple(self.scrub(line, pairs) for line in state.history)  # a backstop
        screen = self.scrub(state.screen, pairs)
        if (
            screen == state.screen
            and context == state.context
            and history == state.history
            and all(a is b for a, b in zip(candidates, state.candidates, strict=True))
        ):
            return state
        return state.model_copy(
            update={
                "candidates": tuple(candidates),
                "context": context,
                "history": history,
                "screen": screen,
            }
        )

    def get(self, name: str) -> InputValue | None:
        for v in self.values:
            if v.name == name:
                return v
        return None

    def secrets(self) -> tuple[str, ...]:
        """The sensitive literals, for redaction processors and leak scans."""
        return tuple(v.reveal() for v in self.values if v.sensitive and v.reveal())


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

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            counted_input_tokens=self.counted_input_tokens + other.counted_input_tokens,
            requests=self.requests + other.requests,
        )


DecidedBy = Literal["", "rules", "scripted", "model", "memory", "human"]
"""Who made a decision ("" where the decider does not say)."""
ConfidenceSource = Literal["", "self", "logprobs", "rules", "scripted", "memory", "human"]
"""Where `confidence` came from: the model's self-report, the chosen answer's token
log-probability, a rule's fixed score, a script, the decision memory, a person."""


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
    done_when: str | None = None
    screen: str = ""


class ActionResult(_Frozen):
    """What a pinned press/fill with settle reported back."""

    changed: bool
    """Whether the settle diff shows anything added or removed (or a value change)."""
    settled: bool = True
    additions: int = 0
    removals: int = 0
    refs_generation: str = ""
    added_refs: tuple[str, ...] = ()


class ActionKind(StrEnum):
    PRESS = "press"
    FILL = "fill"


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
    AWAITING_ANSWER = "awaiting_answer"  # escalated to a person; parked, its device released
    UNPLACEABLE = "unplaceable"  # no registered device could ever take it; expired unplaced

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


class Action(_Frozen):
    kind: ActionKind
    ref: str
    pinned: str
    input: str | None = None
    shown_value: str | None = None
    """The typed value as it may be shown: the literal for plain inputs, stars for secrets."""


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
