"""What the API accepts: a run, a batch, a schedule. Each refuses bad input with a message
that names the field and the fix (the API turns these into 4xx answers)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Annotated, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from scheduler.service.cron import Cron
from workers.core.model import RunStatus
from workers.core.prices import Budget
from workers.core.records import DEVICE_ID_PATTERN, Selector
from workers.core.request import GoalRunRequest, SecretRef
from workers.core.text import plain

SENSITIVE_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "passcode",
        "passphrase",
        "secret",
        "token",
        "otp",
        "totp",
        "pin",
        "apikey",
        "key",
        "credential",
        "credentials",
    }
)
"""Name words that mark an input as sensitive. Matched per word of the name (`api_key`,
`userPassword`, `otp-code`), so `passport`, `bypass` and `footprint` stay plain. `code` is
plain on purpose: a one-time code shown on another device is not a stored secret."""


def looks_sensitive(name: str) -> bool:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)  # userPassword → user_Password
    words = {w for w in re.split(r"[^A-Za-z0-9]+", spaced.casefold()) if w}
    return bool(words & SENSITIVE_WORDS)


def no_plaintext(v: object) -> object:
    """Secrets by reference only: a plaintext value is refused naming the fix."""
    if isinstance(v, dict):
        for name, ref in v.items():
            if not isinstance(ref, dict | SecretRef):
                var = str(name).upper()
                raise ValueError(  # noqa: TRY004 - pydantic validators raise ValueError
                    f"secrets.{name} is a plaintext value, which is refused; pass a "
                    f'reference {{"ref": "env:{var}"}} and set GOALFLEET_SECRET_{var} on '
                    "the workers"
                )
    return v


def no_sensitive_inputs(v: dict[str, str]) -> dict[str, str]:
    """Plain inputs whose names look sensitive are refused: they belong in secrets."""
    for name in v:
        if looks_sensitive(name):
            raise ValueError(
                f"inputs.{name} looks sensitive and would be stored in plain text; move it "
                f'to secrets as {{"{name}": {{"ref": "env:{name.upper()}"}}}} and set '
                f"GOALFLEET_SECRET_{name.upper()} on the workers"
            )
    return v


MAX_PRIORITY = 9
MAX_BATCH = 1000


class _Submit(GoalRunRequest):
    priority: Annotated[int, Field(ge=0, le=MAX_PRIORITY)] = 0
    """0 is the highest (as on Redis)."""

    @field_validator("secrets", mode="before")
    @classmethod
    def _no_plaintext(cls, v: object) -> object:
        return no_plaintext(v)

    @field_validator("inputs", mode="after")
    @classmethod
    def _no_sensitive_inputs(cls, v: dict[str, str]) -> dict[str, str]:
        return no_sensitive_inputs(v)

    @field_validator("steps", mode="before")
    @classmethod
    def _steps_held_alike(cls, v: object) -> object:
        """A journey's goal steps' inputs and secrets are held to the run's rules."""
        for step in v if isinstance(v, list) else ():
            if isinstance(step, dict):
                no_plaintext(step.get("secrets"))
                inputs = step.get("inputs")
                no_sensitive_inputs(inputs if isinstance(inputs, dict) else {})
        return v

    @field_validator("goal", mode="after")
    @classmethod
    def _plain_goal(cls, v: str) -> str:
        return plain(v)

    def goal_request(self) -> GoalRunRequest:
        return GoalRunRequest.model_validate(
            self.model_dump(include=set(GoalRunRequest.model_fields))
        )


def plain_selector(v: Selector | None) -> Selector | None:
    """A selector whose os_version and label values are plain text (`workers.core.text`); the
    refusal names the label (label names are held to their pattern already)."""
    if v is None:
        return v
    if v.os_version is not None:
        try:
            plain(v.os_version)
        except ValueError as exc:
            raise ValueError(f"os_version {exc}") from None
    for name, value in v.labels.items():
        try:
            plain(value)
        except ValueError as exc:
            raise ValueError(f"labels.{name} {exc}") from None
    return v


class RunSubmit(_Submit):
    """One run: to an exact `device`, or to any idle device matching `selector` (default:
    any device)."""

    device: Annotated[str, Field(pattern=DEVICE_ID_PATTERN.pattern)] | None = None
    selector: Selector | None = None

    _plain_selector = field_validator("selector", mode="after")(plain_selector)

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if self.device is not None and self.selector is not None:
            raise ValueError(
                "give either device (one exact device) or selector (any matching device), not both"
            )
        return self


class BatchSubmit(_Submit):
    """Fan-out: one run on every device matching `selector`, or `count` runs routed to any
    idle matching device."""

    selector: Selector = Field(default_factory=Selector)
    count: Annotated[int, Field(ge=1, le=MAX_BATCH)] | None = None

    _plain_selector = field_validator("selector", mode="after")(plain_selector)


class _Recurring(BaseModel):
    """When a schedule fires: every `every_s` seconds, or at each minute `cron` matches."""

    name: Annotated[str, Field(min_length=1, max_length=100)]
    every_s: Annotated[float, Field(ge=1, le=7 * 86400)] | None = None
    cron: Annotated[str, Field(min_length=9, max_length=100)] | None = None
    """Five fields, UTC (`scheduler.service.cron`): `0 * * * *` is every hour."""

    @field_validator("name", mode="after")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        return plain(v)

    @model_validator(mode="after")
    def _one_timing(self) -> Self:
        if (self.every_s is None) == (self.cron is None):
            raise ValueError("give either every_s (seconds) or cron (five fields), not both")
        if self.cron is not None:
            # a CronError is a ValueError: the field and the fix; one that never matches too
            Cron.parse(self.cron).next_after(time.time())
        return self


class ScheduleSubmit(_Recurring, BatchSubmit):
    """A recurring batch (no ETA tasks)."""


MAX_RETRIES = 5
MAX_FLOWS = 100
MAX_MATRIX = 20
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
WEBHOOK_PATTERN = r"^https?://[^\s/?#]+[^\s]{0,1900}$"


class FlowSubmit(_Submit):
    """One flow of a suite: a goal run on every live, healthy device each cell of `matrix`
    matches (a cell is a selector: a platform, labels, an OS version), each failed attempt
    tried again up to `retries` times."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    matrix: Annotated[list[Selector], Field(min_length=1, max_length=MAX_MATRIX)] = Field(
        default_factory=lambda: [Selector()]
    )
    retries: Annotated[int, Field(ge=0, le=MAX_RETRIES)] = 0


class SuiteSubmit(BaseModel):
    """A suite: its flows over their device matrices, as one batch (`POST /v1/batches`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    suite: Annotated[str, Field(pattern=NAME_PATTERN)]
    flows: Annotated[list[FlowSubmit], Field(min_length=1, max_length=MAX_FLOWS)]
    webhook: Annotated[str, Field(pattern=WEBHOOK_PATTERN)] | None = None
    """Called when the batch finishes, a run fails or a question waits (`webhooks`)."""
    budget: Budget | None = None
    """What all the suite's runs may spend together (tokens, cost): each run carries it as
    its `suite_budget`, and the call that would cross it is not made (`workers.core.cost`)."""

    @model_validator(mode="after")
    def _names_unique(self) -> Self:
        names = [f.name for f in self.flows]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"flow {twice[0]!r} is named twice; give each flow its own name")
        return self


class SuiteScheduleSubmit(_Recurring, SuiteSubmit):
    """A recurring suite: its batch, every `every_s` seconds or at each `cron` minute."""


def _suite_or_not(kind: str) -> Callable[[object], str]:
    def pick(v: object) -> str:
        suite = isinstance(v, SuiteSubmit) or (isinstance(v, dict) and "flows" in v)
        return f"Suite{kind}" if suite else kind

    return pick


BatchBody = Annotated[
    Annotated[BatchSubmit, Tag("BatchSubmit")] | Annotated[SuiteSubmit, Tag("SuiteBatchSubmit")],
    Discriminator(_suite_or_not("BatchSubmit")),
]
"""`POST /v1/batches`: a suite when it has `flows`, else one goal's batch; a refusal names
only the fields of the one it is."""
ScheduleBody = Annotated[
    Annotated[ScheduleSubmit, Tag("ScheduleSubmit")]
    | Annotated[SuiteScheduleSubmit, Tag("SuiteScheduleSubmit")],
    Discriminator(_suite_or_not("ScheduleSubmit")),
]
BODY_TAGS = frozenset({"BatchSubmit", "SuiteBatchSubmit", "ScheduleSubmit", "SuiteScheduleSubmit"})
"""The union members' tags a validation error's location holds (the API leaves them out)."""


MAX_LIMIT = 200
"""The most runs one page of `GET /v1/runs` holds."""
CURSOR = r"^[0-9a-f]{1,64}@[0-9.eE+-]{1,32}$"


class RunFilters(BaseModel):
    """`GET /v1/runs`'s query: every filter optional, all of them at once (the MCP server's
    `list_runs` takes it too)."""

    model_config = ConfigDict(extra="forbid")

    status: RunStatus | None = None
    device: Annotated[str | None, Field(min_length=1, max_length=128)] = None
    batch: Annotated[str | None, Field(min_length=6, max_length=64)] = None
    """A batch id, or a unique prefix of 6+ characters of one."""
    schedule: Annotated[str | None, Field(min_length=1, max_length=64)] = None
    suite: Annotated[str | None, Field(min_length=1, max_length=64)] = None
    """Runs of this suite's batches (a flows file's `suite`)."""
    flow: Annotated[str | None, Field(min_length=1, max_length=64)] = None
    """Attempts of this suite flow (a flows file's flow `name`)."""
    goal: Annotated[str | None, Field(min_length=1, max_length=200)] = None
    """Words the goal contains (case-insensitive)."""
    since: Annotated[float | None, Field(ge=0)] = None
    """Submitted at or after this time (epoch seconds)."""
    until: Annotated[float | None, Field(ge=0)] = None
    """Submitted before this time (epoch seconds)."""
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 50
    cursor: Annotated[str | None, Field(pattern=CURSOR, max_length=100)] = None
    """The `next` of the page before."""
