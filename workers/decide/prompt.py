"""What `InstructorDecider` sends for one step: one short user message and a per-step schema.

The prompt is built to be small (aim: at most 120 input tokens median and 150 max per decision
on the sign-in screens, counting the message and the schema; see `bench/bench_tokens.py`):

- the instruction is the message's first line, not (only) a tool description or a system
  message: some servers use a tool schema only to constrain decoding and never show it to the
  model (llama.cpp), and some chat templates drop system messages (Gemma's);
- one line per candidate: `e3 field: Email`; no element values except a switch's state, so
  text a field holds (which may be a typed input) never reaches the model;
- input *names* only, never values (`DecideState` carries no values at all), and only inside
  the answer's enum (`e2=email`), so there is no separate inputs line;
- the response model has one required enum, `action`, that folds the target, the input, done
  and blocked: `"e2=email"`, `"e3"`, `"done"`, `"blocked"`. A ref not on the screen is not in
  it, and a text field appears only paired with an input, so neither can validate. A
  self-reported `confidence` is added only where the server returns no token logprobs
  (`self_rated=True`). No free-text field: nothing can keep a server generating. The tool is
  `act` with an empty description.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from workers.core.model import NONE, DecideState, Kind
from workers.core.params import HISTORY_LINES

DONE = "done"
BLOCKED = "blocked"
FILL_SEP = "="
"""`e2=email`: type input `email` into field `e2`."""

INSTRUCTION = "Next action for goal: {goal}"
"""The whole instruction, the first line of the user message; the answer's enum says the rest
(`e2=email` types input `email` into `e2`; `done`; `blocked`)."""
ACTION_KEY = "action"
TOOL_NAME = "act"
TOOL_DESCRIPTION = ""
"""Empty on purpose: the instruction travels in the message, where every server shows it."""
_SHORT_KIND = {
    Kind.TEXT_FIELD: "field",
    Kind.SECURE_TEXT_FIELD: "secure-field",
    Kind.MENU_ITEM: "menu-item",
}
"""One word each, so a candidate line reads `ref kind name` without a delimiter."""


def _name(text: str) -> str:
    return " ".join(text.split()) or "(no name)"


def _compact_history(line: str) -> str:
    """`3: pressed Continue; screen changed` → `pressed Continue`; a no-op keeps its warning."""
    text = line.split(": ", 1)[-1]
    return text.removesuffix("; screen changed").replace("; nothing changed", " (no change)")


def render_user(state: DecideState) -> str:
    """The user message: instruction and goal, typed inputs, screen text, candidates, history."""
    lines = [INSTRUCTION.format(goal=state.goal)]
    if state.done_when:
        lines.append(f"Done when visible: {state.done_when}")
    typed = [n for n in state.input_names if n in state.used_inputs]
    if typed:
        lines.append(f"Typed: {', '.join(typed)}")
    if state.context:
        lines.append(" | ".join(state.context))
    for c in state.candidates:
        kind = _SHORT_KIND.get(c.kind, c.kind.value)
        line = f"{c.ref} {kind} {_name(c.name)}"
        if c.inferred:  # no name of its own: the label beside it
            line += " (label beside it)"
        if c.kind.stateful and c.value:
            line += f" ={c.value}"
        if c.ref in state.futile:
            line += " (pressed here: nothing changed)"
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
    """The chat messages for one decision: one user message, instruction first. The schema
    travels as the tool definition (or, in JSON mode, instructor adds it as text)."""
    return [{"role": "user", "content": render_user(state)}]


def actions_for(state: DecideState) -> tuple[str, ...]:
    """The answers this step admits, in screen order: each ref (a text field once per input
    name, `e2=email`; never bare, and not at all without inputs), then done and blocked."""
    out: list[str] = []
    for c in state.candidates:
        if c.kind.fillable:
            out += [f"{c.ref}{FILL_SEP}{name}" for name in state.input_names]
        else:
            out.append(c.ref)
    return (*out, DONE, BLOCKED)


def _compact_schema(schema: dict[str, Any]) -> None:
    # Per-field titles and bounds only cost tokens: the names say enough, and the bounds are
    # still validated (a confidence of 90 fails validation and the re-ask says why). An empty
    # description keeps instructor from writing its own sentence into the tool.
    schema["description"] = TOOL_DESCRIPTION
    for prop in schema.get("properties", {}).values():
        for key in ("title", "minimum", "maximum"):
            prop.pop(key, None)
        if "enum" in prop:  # an enum of strings says its type already (valid JSON Schema)
            prop.pop("type", None)


class Choice(BaseModel):
    """Base of the per-step response models; `response_model_for` narrows `action`."""

    model_config = ConfigDict(json_schema_extra=_compact_schema, title=TOOL_NAME)

    action: str

    def parts(self) -> tuple[str, str, bool, bool]:
        """(target, input, done, blocked) of the answer."""
        if self.action == DONE:
            return NONE, NONE, True, False
        if self.action == BLOCKED:
            return NONE, NONE, False, True
        target, _, input_name = self.action.partition(FILL_SEP)
        return target, input_name or NONE, False, False


class SelfRated(Choice):
    """A `Choice` with the model's own confidence, for servers that return no logprobs."""

    confidence: float = Field(ge=0.0, le=1.0)


@functools.lru_cache(maxsize=256)
def _model_for(actions: tuple[str, ...], *, self_rated: bool) -> type[Choice]:
    action_t: Any = Literal[actions]  # built per screen
    base = SelfRated if self_rated else Choice
    return create_model(TOOL_NAME, __base__=base, action=(action_t, ...))


def response_model_for(state: DecideState, *, self_rated: bool = False) -> type[Choice]:
    """The response model for this step: `action` in `actions_for(state)`, and a
    `confidence` with `self_rated`. Cached per set of answers."""
    return _model_for(actions_for(state), self_rated=self_rated)
