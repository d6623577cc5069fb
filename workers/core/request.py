"""What a caller asks for: one goal run (`GoalRunRequest`, the API body and what the task
message points at), its secrets by reference, and the decider specs it names."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workers.core.app import AppRequest, ResetPolicy
from workers.core.bounds import MAX_INPUT_CHARS, MAX_INPUTS
from workers.core.model import INPUT_NAME_PATTERN, PROVIDER_SPEC
from workers.core.params import RunParams


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


MAX_GOAL_CHARS = 500
MAX_DEVICE_WAIT_S = 7 * 86400


class SecretRef(_Frozen):
    """A sensitive input given by reference: the worker resolves it from its environment."""

    ref: Annotated[str, Field(pattern=r"^(env:[A-Za-z_][A-Za-z0-9_]{0,100})$")]
    plain_field: bool = False
    """Allow this secret into a plain (not secure) text field: a one-time code, whose field is
    almost never a secure one. The value is still redacted everywhere."""


def check_decider_spec(v: str) -> str:
    if len(v) > 100 or (v not in {"rules", "scripted"} and not PROVIDER_SPEC.fullmatch(v)):  # noqa: PLR2004
        raise ValueError(
            f'decider {v[:100]!r} is not a decider; use "rules", "scripted" or '
            '"<provider>/<model>" (e.g. "openai/gpt-4o-mini")'
        )
    return v


class GoalRunRequest(RunParams):
    """A request to run one goal; what the API accepts and the task message points at. The
    run parameters (`max_steps`, `min_confidence`, …) come from `RunParams`, flat."""

    goal: Annotated[str, Field(min_length=1, max_length=MAX_GOAL_CHARS)]
    inputs: dict[str, Annotated[str, Field(max_length=MAX_INPUT_CHARS)]] = Field(
        default_factory=dict, max_length=MAX_INPUTS
    )
    secrets: dict[str, SecretRef] = Field(default_factory=dict, max_length=MAX_INPUTS)
    decider: Annotated[str, Field(min_length=1, max_length=100)] = "rules"
    memory: bool = True
    """Use the fleet's decision memory for this run (read and, if it ends done, write)."""
    escalate_to: Annotated[list[str], Field(max_length=4)] = Field(default_factory=list)
    """Deciders asked in turn, in the same step, when the one before escalates."""
    ask_person: bool = True
    """When the last decider escalates, park the run with its question for a person (if the
    fleet asks people: `GOALFLEET_QUESTIONS`); false ends it `escalated` at once."""
    app: AppRequest | None = None
    """The app under test (`{"id": ..., "version": ...}`), checked against the device's; its
    result and step rows name the app the worker drove (`workers.core.app`)."""
    reset: ResetPolicy | None = None
    """How the app is reset before the run (relaunch, clear-state, reinstall, none); None:
    the device's own policy (`goalfleet worker --reset`)."""
    device_wait_s: Annotated[float, Field(gt=0, le=MAX_DEVICE_WAIT_S)] | None = None
    """How long the run may wait while every device it can go to is down or quarantined;
    past it, it ends `unplaceable` saying why. None: it waits until one returns (a busy device
    is never down: the run waits for it)."""

    @field_validator("decider")
    @classmethod
    def _decider_spec(cls, v: str) -> str:
        return check_decider_spec(v)

    @field_validator("escalate_to")
    @classmethod
    def _chain_specs(cls, v: list[str]) -> list[str]:
        return [check_decider_spec(s) for s in v]

    def run_params(self) -> RunParams:
        """The parameters alone, as `run_goal` takes them."""
        return RunParams(**{name: getattr(self, name) for name in RunParams.model_fields})

    @model_validator(mode="after")
    def _names_once(self) -> Self:
        both = sorted(set(self.inputs) & set(self.secrets))
        if both:
            raise ValueError(
                f"{both[0]!r} is both an input and a secret; give each name once "
                "(secrets for sensitive values, inputs for the rest)"
            )
        return self

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("goal is blank; say what the run should achieve, e.g. 'Sign in'")
        return v

    @field_validator("inputs", "secrets")
    @classmethod
    def _names(cls, v: dict[str, object]) -> dict[str, object]:
        for name in v:
            if not INPUT_NAME_PATTERN.fullmatch(name):
                raise ValueError(
                    f"input name {name!r} is not valid: start with a letter, then letters, "
                    "digits or _ (at most 40 characters)"
                )
        return v
