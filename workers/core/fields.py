"""Which text field takes which input, and whether a press may submit a form yet.

One home for "which field takes which input": the rules decider fills by it, and the loop
checks every decider's submit by it (`unready`), so the two cannot disagree about a form.

A field takes an input when its name (its own, or the label beside it:
`workers.core.labels`) says so — the input's own name ("Email" ← `email`), a synonym
("Email or username" ← `username`, "Verification code" ← `code`) — or it is a secure field
and the input is password-like. A secure field never takes anything else (an e-mail typed
into a password field is a leak).

**Before a submit** — a press of a forward control ("OK", "Sign in", "Continue", one named
like the goal) on a screen with an enabled text field that is still empty — the loop asks
`unready`, whoever decided the press:

1. an empty field that looks required (a secure field, or one named like a credential) that
   no supplied input takes: the run ends `blocked` ("this screen asks for 'Password'; no input
   named password was supplied"), nothing pressed;
2. an empty field that a supplied input not typed yet takes: the press escalates (fill it
   first; a field cleared after its input was typed is `workers.core.repeats`' case);
3. an empty field with no name, or only an inferred one that no input takes, while an input
   is still untyped: the press escalates — which field takes which input is a guess;
4. else the press goes ahead (an optional field left empty).
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.core.model import Candidate, DecideState, Decision, Kind, Snapshot
from workers.core.words import FIELD_SYNONYMS, PASSWORD_LIKE, has, norm, onward

SECURE_TAKES = (*PASSWORD_LIKE, "code", "otp")
"""The inputs a secure field takes (by a part of the input's name)."""
CREDENTIALS = ("email", "username", "user", "login", "phone", "code", "otp", "password", "pin")
"""Inputs a sign-in asks for: an empty field named like one of them is a required field."""
BY_NAME = 0.9
"""`takes`' score for a field named like the input (its own name or a synonym)."""
_SUBMITTERS = frozenset({Kind.BUTTON, Kind.MENU_ITEM, Kind.CELL})
"""Kinds whose press may submit a form (a link, a tab, a switch never does)."""


def _forward(c: Candidate, goal: str) -> bool:
    """Whether pressing `c` moves a flow on (a pressable, enabled control named like the goal,
    a forward or an accepting verb: `workers.core.words.onward`)."""
    return c.kind.pressable and c.enabled and onward(norm(c.name), goal)


def takes(c: Candidate, input_name: str) -> tuple[float, str]:
    """How well field `c` takes input `input_name` (0.0: it does not), and why."""
    key = input_name.casefold()
    if c.kind is Kind.SECURE_TEXT_FIELD and not any(p in key for p in SECURE_TAKES):
        return 0.0, ""  # never type an email into a password field
    name = norm(c.name)
    spaced = norm(key.replace("_", " "))
    if name and (has(name, spaced) or has(name.replace(" ", ""), key)):
        return 0.95, f"field named like input {input_name!r}"
    for syn in FIELD_SYNONYMS.get(key, ()):
        if has(name, syn):
            return 0.9, f"{syn!r} is a synonym of {input_name!r}"
    if c.kind is Kind.SECURE_TEXT_FIELD and any(p in key for p in PASSWORD_LIKE):
        return 0.85, f"secure field takes the password-like input {input_name!r}"
    return 0.0, ""


def asks_for(c: Candidate) -> tuple[str, ...]:
    """The credential inputs an empty field `c` asks for; () when it looks optional."""
    if c.kind is Kind.SECURE_TEXT_FIELD:
        return ("password",)
    return tuple(k for k in CREDENTIALS if takes(c, k)[0] >= BY_NAME)  # by name, not by kind


@dataclass(frozen=True)
class Unready:
    """Why a submit may not be pressed yet: `blocked` ends the run, else it escalates."""

    why: str
    blocked: bool = False


def unready(
    d: Decision, snap: Snapshot, state: DecideState, typed: frozenset[str]
) -> Unready | None:
    """Why pressing `d.target` now would submit the form with a field wrongly empty, or None
    (see the module docstring). `typed`: refs of fields this run typed into that still hold
    it (a secure field shows nothing either way)."""
    target = snap.candidate(d.target)
    if target is None or target.kind not in _SUBMITTERS or not _forward(target, norm(state.goal)):
        return None
    shown = {n.ref: n.value for n in snap.nodes}
    empty = [
        c
        for c in snap.candidates
        if c.kind.fillable
        and c.enabled
        and c.ref not in typed
        and not (c.value.strip() or shown.get(c.ref, "").strip())
    ]
    wanted = {c.ref: [i for i in state.input_names if takes(c, i)[0] > 0] for c in empty}
    for c in empty:
        needs = asks_for(c)
        if needs and not wanted[c.ref]:
            named = " or ".join(needs)
            return Unready(
                f"this screen asks for {_called(c)}; no input named {named} was supplied",
                blocked=True,
            )
    untyped = [n for n in state.input_names if n not in state.used_inputs]
    for c in empty:
        fills = [i for i in wanted[c.ref] if i in untyped]  # a typed one cleared: `repeats`
        if fills:
            return Unready(
                f"{target.name!r} would submit with {_called(c)} empty, which input "
                f"{fills[0]!r} fills: fill it first"
            )
        if untyped and (c.inferred or not c.name):
            return Unready(
                f"cannot tell which field takes input {untyped[0]!r}: {_called(c)} has no name "
                "of its own and takes none of the inputs; a person should say"
            )
    return None


def _called(c: Candidate) -> str:
    if not c.name:
        return f"an unnamed {c.kind.value} ({c.ref})"
    return f"{c.name!r} (the label beside it)" if c.inferred else repr(c.name)
