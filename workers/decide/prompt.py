"""What `InstructorDecider` sends for one step: two short messages and a per-step schema.

The prompt is built to be small (the budget is 200 input tokens per decision on the sign-in
screens, counting messages and the schema; see `bench/bench_tokens.py`):

- one line per candidate: `e3 field "Email"`; no element values except a switch's state,
  so text a field holds (which may be a typed input) never reaches the model;
- input *names* only, never values (`DecideState` carries no values at all);
- a response model whose `target` is a `Literal` of this screen's refs plus "none" and whose
  `input` is a `Literal` of the input names plus "none", with no per-field titles and short
  descriptions, so a ref not on the screen cannot validate.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from workers.core.model import NONE, DecideState, Kind
from workers.core.params import HISTORY_LINES

INSTRUCTION = (
    "Pick the element that advances the goal; a text field needs an input. "
    "done: goal met. blocked: stuck."
)
"""The whole instruction. It travels as the tool's description (the response model's
docstring), so there is no system message to pay for."""

"""History lines looked at; only the newest and any that changed nothing are rendered (what
was typed is already in the "typed:" list)."""
MAX_REASON_CHARS = 120
_SHORT_KIND = {
    Kind.TEXT_FIELD: "field",
    Kind.SECURE_TEXT_FIELD: "secure field",
    Kind.MENU_ITEM: "menu item",
}
_STATEFUL = {Kind.SWITCH, Kind.CHECKBOX}


def _name(text: str) -> str:
    return " ".join(text.split()) or "(no name)"


def _compact_history(line: str) -> str:
    """`3: pressed Continue; screen changed` → `pressed Continue`; a no-op keeps its warning."""
    text = line.split(": ", 1)[-1]
    return text.removesuffix("; screen changed").replace("; nothing changed", " (no change)")


def render_user(state: DecideState) -> str:
    """The user message: goal, inputs, screen text, candidates, recent history."""
    lines = [f"Goal: {state.goal}"]
    if state.done_when:
        lines.append(f"Done when visible: {state.done_when}")
    if state.input_names:
        typed = [n for n in state.input_names if n in state.used_inputs]
        note = ""
        if typed:
            note = (
                " (all typed)"
                if len(typed) == len(state.input_names)
                else f" (typed: {', '.join(typed)})"
            )
        lines.append(f"Inputs: {', '.join(state.input_names)}{note}")
    if state.context:
        lines.append("Text: " + " | ".join(state.context))
    for c in state.candidates:
        kind = _SHORT_KIND.get(c.kind, c.kind.value)
        line = f"{c.ref} {kind}: {_name(c.name)}"
        if c.kind in _STATEFUL and c.value:
            line += f" ={c.value}"
        lines.append(line)
    if not state.candidates:
        lines.append("(none)")
    window = state.history[-HISTORY_LINES:]
    recent = [
        _compact_history(h)
        for i, h in enumerate(window)
        if i == len(window) - 1 or not h.endswith("screen changed")
    ]
    if recent:
        lines.append("Last: " + "; ".join(recent))
    return "\n".join(lines)


def render_messages(state: DecideState) -> list[dict[str, str]]:
    """The chat messages for one decision: one user message. The instruction and the schema
    travel as the tool definition (or the JSON schema), see `response_model_for`."""
    return [{"role": "user", "content": render_user(state)}]


def _compact_schema(schema: dict[str, Any]) -> None:
    # instructor names the tool after the model title, so that stays; per-field titles and
    # defaults and bounds only cost tokens: the names say enough, and the bounds are still
    # validated (a confidence of 90 fails validation and the re-ask says why).
    for prop in schema.get("properties", {}).values():
        for key in ("title", "default", "minimum", "maximum"):
            prop.pop(key, None)
        if "enum" in prop:  # an enum of strings says its type already (valid JSON Schema)
            prop.pop("type", None)


class Choice(BaseModel):
    """Base of the per-step response models; `response_model_for` narrows the two enums."""

    model_config = ConfigDict(json_schema_extra=_compact_schema)

    fillable_refs: ClassVar[frozenset[str]] = frozenset()
    """The text-field refs of the screen this model was built for."""

    target: str
    input: str
    done: bool = False
    blocked: bool = False
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = ""

    @field_validator("reason", mode="before")
    @classmethod
    def _clip_reason(cls, value: object) -> object:
        return value.strip()[:MAX_REASON_CHARS] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _fits_the_screen(self) -> Self:
        # Errors a re-ask can fix; the loop would only escalate them.
        if self.done or self.blocked:
            return self
        if self.target == NONE:
            msg = 'target "none" needs done or blocked true'
            raise ValueError(msg)
        if self.target in type(self).fillable_refs and self.input == NONE:
            msg = f"{self.target} is a text field: pick an input"
            raise ValueError(msg)
        return self


@functools.lru_cache(maxsize=256)
def _model_for(
    refs: tuple[str, ...], fillable: frozenset[str], inputs: tuple[str, ...]
) -> type[Choice]:
    target_t: Any = Literal[(*refs, NONE)]  # built per screen
    input_t: Any = Literal[(*inputs, NONE)]  # built per run
    model = create_model(
        "Act",
        __base__=Choice,
        __doc__=INSTRUCTION,
        target=(target_t, ...),
        input=(input_t, ...),
    )
    model.fillable_refs = fillable
    return model


def response_model_for(state: DecideState) -> type[Choice]:
    """The response model for this step: `target` in this screen's refs plus "none", `input` in
    the input names plus "none". Cached per (refs, fillable refs, inputs)."""
    refs = tuple(c.ref for c in state.candidates)
    fillable = frozenset(c.ref for c in state.candidates if c.kind.fillable)
    return _model_for(refs, fillable, tuple(state.input_names))
