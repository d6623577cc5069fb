"""What the API accepts: a run, a batch, a schedule. Each refuses bad input with a message
that names the field and the fix (the API turns these into 4xx answers)."""

from __future__ import annotations

import re
from typing import Annotated, Self

from pydantic import Field, field_validator, model_validator

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


MAX_PRIORITY = 9
MAX_BATCH = 1000


class _Submit(GoalRunRequest):
    priority: Annotated[int, Field(ge=0, le=MAX_PRIORITY)] = 0
    """0 is the highest (as on Redis)."""

    @field_validator("secrets", mode="before")
    @classmethod
    def _no_plaintext(cls, v: object) -> object:
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

    @field_validator("inputs", mode="after")
    @classmethod
    def _no_sensitive_inputs(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if looks_sensitive(name):
                raise ValueError(
                    f"inputs.{name} looks sensitive and would be stored in plain text; move it "
                    f'to secrets as {{"{name}": {{"ref": "env:{name.upper()}"}}}} and set '
                    f"GOALFLEET_SECRET_{name.upper()} on the workers"
                )
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


class ScheduleSubmit(BatchSubmit):
    """A recurring batch: every `every_s` seconds, submit the batch (no ETA tasks)."""

    name: Annotated[str, Field(min_length=1, max_length=100)]
    every_s: Annotated[float, Field(ge=1, le=7 * 86400)]

    @field_validator("name", mode="after")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        return plain(v)
