"""What a caller asks for: one goal run (`GoalRunRequest`, the API body and what the task
message points at), its secrets by reference, and the decider specs it names."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workers.core.app import AppRequest, ResetPolicy
from workers.core.bounds import MAX_INPUT_CHARS, MAX_INPUTS
from workers.core.model import INPUT_NAME_PATTERN, PROVIDER_SPEC
from workers.core.params import MAX_STEPS_LIMIT, RunParams
from workers.core.prices import Budget
from workers.core.shot_mode import ShotMode
from workers.core.text import plain


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


StepKind = Literal[
    "goal", "check", "press", "fill", "launch", "relaunch", "open", "back", "scroll", "wait",
    "submit",
]  # fmt: skip
STEP_KINDS: tuple[StepKind, ...] = (
    "goal", "check", "press", "fill", "launch", "relaunch", "open", "back", "scroll", "wait",
    "submit",
)  # fmt: skip
BARE_STEPS = ("back", "launch", "relaunch", "submit")
"""Steps written as a bare word (`- back`)."""
MAX_JOURNEY_STEPS = 50
GOAL_ONLY = ("inputs", "secrets", "done_when", "max_steps")
"""A goal step's own settings (no other step takes them)."""
PLAIN_CHECK = re.compile(
    "^\\s*[\"'\u201c\u2018](?P<text>.+?)[\"'\u201d\u2019]\\s+is\\s+(?P<not>not\\s+)?visible\\s*\\.?\\s*$",
    re.IGNORECASE,
)
"""A check the rules decide: `"Willkommen" is visible`, `"Error" is not visible`."""


class FillStep(_Frozen):
    field: Annotated[str, Field(min_length=1, max_length=200)]
    """The text field's name (its label, or the name inferred from its neighbours)."""
    input: Annotated[str, Field(pattern=INPUT_NAME_PATTERN.pattern)]
    """The input (or secret) to type into it."""


class ScrollStep(_Frozen):
    direction: Literal["up", "down", "left", "right"] = "down"
    until: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """Scroll until this text is visible (else one page)."""
    max: Annotated[int, Field(ge=1, le=20)] = 5
    """Scrolls before the step fails (with `until`)."""


class WaitStep(_Frozen):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    for_: Annotated[str, Field(alias="for", min_length=1, max_length=200)]
    timeout_s: Annotated[float, Field(gt=0, le=120)] = 10.0


class JourneyStep(_Frozen):
    """One step of a journey: exactly one of the kinds (`STEP_KINDS`), with a `name` for the
    reports. A goal step has its own `inputs`, `secrets`, `done_when` and `max_steps`."""

    name: Annotated[str, Field(max_length=64)] = ""
    goal: Annotated[str, Field(min_length=1, max_length=MAX_GOAL_CHARS)] | None = None
    inputs: dict[str, Annotated[str, Field(max_length=MAX_INPUT_CHARS)]] = Field(
        default_factory=dict, max_length=MAX_INPUTS
    )
    secrets: dict[str, SecretRef] = Field(default_factory=dict, max_length=MAX_INPUTS)
    done_when: Annotated[str, Field(max_length=200)] | None = None
    max_steps: Annotated[int, Field(ge=1, le=MAX_STEPS_LIMIT)] | None = None
    check: Annotated[str, Field(min_length=1, max_length=300)] | None = None
    press: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    fill: FillStep | None = None
    open: Annotated[str, Field(min_length=1, max_length=2000)] | None = None
    scroll: ScrollStep | None = None
    wait: WaitStep | None = None
    back: bool = False
    launch: bool = False
    relaunch: bool = False
    submit: bool = False

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, v: Any) -> Any:  # noqa: ANN401 - pydantic's before-validator input
        """`back` (a bare word) is `{"back": true}`; `scroll: {}` or `scroll: null` one page
        down."""
        if isinstance(v, str) and v in BARE_STEPS:
            return {v: True}
        if isinstance(v, dict) and "scroll" in v and not v["scroll"]:
            others = [k for k in STEP_KINDS if k != "scroll" and v.get(k) not in (None, False)]
            return v if others else {**v, "scroll": {}}  # a dumped step has scroll: null
        return v

    @field_validator("name", "goal", "check", "press", "open", "done_when")
    @classmethod
    def _plain_text(cls, v: str | None) -> str | None:
        return v if v is None else plain(v)

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        kinds = self.kinds()
        if len(kinds) != 1:
            said = ", ".join(kinds) if kinds else "none"
            raise ValueError(
                f"a step is exactly one of {', '.join(STEP_KINDS)}; this one is {said}"
            )
        if kinds[0] != "goal":
            extra = [k for k in GOAL_ONLY if getattr(self, k) not in (None, {})]
            if extra:
                raise ValueError(f"{extra[0]} belongs to a goal step, not to a {kinds[0]} step")
        return self

    def kinds(self) -> list[StepKind]:
        return [k for k in STEP_KINDS if getattr(self, k) not in (None, False)]

    @property
    def kind(self) -> StepKind:
        return self.kinds()[0]

    def title(self, index: int) -> str:
        """How reports name it: its `name`, else its kind and what it acts on."""
        if self.name:
            return self.name
        what = {
            "goal": self.goal,
            "check": self.check,
            "press": self.press,
            "fill": self.fill.field if self.fill else None,
            "open": self.open,
            "scroll": f"{self.scroll.direction}"
            + (f" until {self.scroll.until}" if self.scroll and self.scroll.until else "")
            if self.scroll
            else None,
            "wait": f"for {self.wait.for_}" if self.wait else None,
        }.get(self.kind)
        return f"{index}. {self.kind} {what}"[:120] if what else f"{index}. {self.kind}"


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
    suite_budget: Budget | None = None
    """What all the runs of this run's suite may spend together (a flows file's `budget`, set
    on each run of the batch): read and added to in the batch's ledger (`workers.core.cost`)."""
    video: ShotMode | None = None
    """This run's video: `on`, `off` or `failure-only` (kept only if it does not end `done`);
    None: the fleet's (`GOALFLEET_VIDEO`). A device that cannot film keeps none either way."""
    reset: ResetPolicy | None = None
    """How the app is reset before the run (relaunch, clear-state, reinstall, none); None:
    the device's own policy (`goalfleet worker --reset`)."""
    device_wait_s: Annotated[float, Field(gt=0, le=MAX_DEVICE_WAIT_S)] | None = None
    """How long the run may wait while every device it can go to is down or quarantined;
    past it, it ends `unplaceable` saying why. None: it waits until one returns (a busy device
    is never down: the run waits for it)."""
    steps: (
        Annotated[list[JourneyStep], Field(min_length=1, max_length=MAX_JOURNEY_STEPS)] | None
    ) = None
    """A journey: these steps in order on one device in one run (`workers.core.journey`),
    instead of one `goal`. The run's `done_when` and `max_steps` are its goal steps'
    defaults; its `inputs` and `secrets` every step's."""

    @model_validator(mode="before")
    @classmethod
    def _journey_goal(cls, v: Any) -> Any:  # noqa: ANN401 - pydantic's before-validator input
        """A journey's `goal` is what it does, said once for lists and logs."""
        if isinstance(v, dict) and v.get("steps") and isinstance(v["steps"], list):
            said = f"journey of {len(v['steps'])} steps"
            if v.get("goal") not in (None, said):  # a stored request reads back as it was
                raise ValueError(
                    "give goal (one goal) or steps (a journey), not both; a journey's goals "
                    "are its goal steps"
                )
            return {**v, "goal": said}
        return v

    def every_input(self) -> tuple[dict[str, str], dict[str, SecretRef]]:
        """The run's plain inputs and secrets, a journey's goal steps' own included."""
        inputs, secrets = dict(self.inputs), dict(self.secrets)
        for step in self.steps or ():
            inputs.update(step.inputs)
            secrets.update(step.secrets)
        return inputs, secrets

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
        inputs, secrets = self.every_input()
        both = sorted(set(inputs) & set(secrets))
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
