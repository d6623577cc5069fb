"""No repeated submits: what the loop will not do again, whoever decided it.

Four rules, enforced in the loop after every decider's answer (a rules or scripted decider, a
model, a chain of them, the decision memory):

1. A control is never pressed again on a screen that looks exactly as it did right after a
   press of it that changed nothing or brought up an error text.
2. A press that submits credentials — a secret was typed in the step before, or earlier on
   this screen — is made at most once per distinct screen.
3. A visible error after such a submit ends the run `blocked`, the error text in the reason.
4. A fill of a field that already holds the same input is never repeated.

Words used here:

- a **control** is named by its role and its platform identifier (its name where the
  platform gives none) and its place among look-alikes: a filled Android field, whose label
  turns into its text, stays the same control;
- a screen **looks the same** when every node's type, role, label, value, enabled state and
  identifier are the same: what its fields show is part of it, so a press after typing
  something new is a new attempt (rule 2 caps the ones that submit credentials);
- a **distinct screen** (rule 2) is one with other text fields: a screen is its form, so an
  error banner or a cleared field does not make it another screen;
- an **error text** is a static text that a press brought up without leaving the screen (its
  controls, or its non-empty form, are the same), read at the next snapshot.

Nothing here leaves the process: screens are kept as hashes, and every reason is scrubbed of
the run's input values before a decider, a row or a result sees it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from workers.core.memory import role
from workers.core.model import NONE, Candidate, Decision, Inputs, Kind, Snapshot
from workers.core.projection import kind_of

MAX_ERROR_CHARS = 120
_NOT_SUBMITS = frozenset({Kind.SWITCH, Kind.CHECKBOX, Kind.LINK})
"""Presses that never count as a credential submit: toggles ("Show password") and links
("Forgot password?")."""


def _digest(lines: list[str]) -> str:
    h = hashlib.blake2b(digest_size=12)
    for line in lines:
        h.update(line.encode() + b"\n")
    return h.hexdigest()


def _controls(snap: Snapshot) -> dict[str, Candidate]:
    """Each candidate by its control key, in screen order."""
    ids = {n.ref: n.identifier for n in snap.nodes}
    seen: Counter[str] = Counter()
    out: dict[str, Candidate] = {}
    for c in snap.candidates:
        base = f"{role(c.kind)}|{ids.get(c.ref) or c.name}"
        out[f"{base}|{seen[base]}"] = c
        seen[base] += 1
    return out


def control_key(snap: Snapshot, ref: str) -> str:
    return next((k for k, c in _controls(snap).items() if c.ref == ref), "")


def look(snap: Snapshot) -> str:
    """The screen exactly as it looks (rule 1), without refs or generations."""
    return _digest(
        [
            f"{n.type}|{n.role}|{n.label}|{n.value}|{n.enabled}|{n.identifier}|{n.secure}"
            for n in snap.nodes
        ]
    )


def form(snap: Snapshot) -> str:
    """The screen's text fields (rule 2's distinct screen); "" for a screen without one."""
    fields = [k for k, c in _controls(snap).items() if c.kind.fillable]
    return _digest(fields) if fields else ""


def _texts(snap: Snapshot) -> Counter[str]:
    shown = (" ".join((n.label or n.value).split()) for n in snap.nodes if kind_of(n) is Kind.TEXT)
    return Counter(t for t in shown if t)


def _shows(snap: Snapshot, key: str) -> str | None:
    """What the field `key` shows in `snap` (None: not on this screen)."""
    c = _controls(snap).get(key)
    if c is None:
        return None
    return next((n.value for n in snap.nodes if n.ref == c.ref), "")


@dataclass(frozen=True)
class _Pending:
    """The last action made, judged at the next snapshot."""

    key: str
    snap: Snapshot
    changed: bool
    input: str | None = None
    """The input name a fill typed; None for a press."""
    submit: bool = False


@dataclass
class Repeats:
    """One run's memory of what it pressed and typed (see the module docstring)."""

    inputs: Inputs
    futile: dict[tuple[str, str], str] = field(default_factory=dict)
    """(how the screen looked, control) → what pressing it there did ("" for nothing, else
    the error text it brought up)."""
    submitted: set[str] = field(default_factory=set)
    """Forms on which credentials were submitted."""
    armed: set[str] = field(default_factory=set)
    """Forms on which a secret was typed."""
    secret_just_typed: bool = False
    holds: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Field → (the input typed into it, what it showed right after)."""
    pending: _Pending | None = None

    def seen(self, snap: Snapshot) -> str | None:
        """Judge the last action by this snapshot; the reason the run ends (rule 3), or None."""
        last, self.pending = self.pending, None
        if last is None:
            return None
        if last.input is not None:
            shows = _shows(snap, last.key)
            if shows is not None:
                self.holds[last.key] = (last.input, shows)
            return None
        error = self._error(last.snap, snap)
        if not last.changed or error is not None:
            self.futile[look(snap), last.key] = error or ""
        if last.submit and error is not None:
            return f"submitting the credentials brought up an error: {error!r}"
        return None

    def _error(self, before: Snapshot, after: Snapshot) -> str | None:
        new = _texts(after) - _texts(before)
        if not new:
            return None
        same_form = bool(form(before)) and form(before) == form(after)
        if not same_form and list(_controls(before)) != list(_controls(after)):
            return None  # it left the screen: new texts are the next screen's
        text = next(t for t in _texts(after) if t in new)
        return self.inputs.scrub(text)[:MAX_ERROR_CHARS]

    def refusal(self, d: Decision, snap: Snapshot) -> str | None:
        """Why acting on `d` would repeat what rules 1, 2 and 4 forbid, or None."""
        target = snap.candidate(d.target)
        if target is None:
            return None
        key = control_key(snap, target.ref)
        name = self.inputs.scrub(target.name) or target.ref
        if target.kind.fillable:
            held = self.holds.get(key)
            if d.input != NONE and held is not None and held == (d.input, _shows(snap, key)):
                return f"not typed again: {name!r} already holds {{{d.input}}}"
            return None
        futile = self.futile.get((look(snap), key))
        if futile is not None:
            did = f"brought up {futile!r}" if futile else "changed nothing"
            return f"not pressed again: pressing {name!r} on this unchanged screen {did}"
        if self._submits(snap, target) and form(snap) in self.submitted:
            return f"not pressed: {name!r} would submit the credentials a second time here"
        return None

    def _submits(self, snap: Snapshot, target: Candidate) -> bool:
        if target.kind in _NOT_SUBMITS:
            return False
        return self.secret_just_typed or form(snap) in self.armed

    def acted(self, snap: Snapshot, ref: str, input_name: str | None, *, changed: bool) -> None:
        """Record an action the device took (a press when `input_name` is None)."""
        target = snap.candidate(ref)
        if target is None:  # the loop acts only on candidates
            raise AssertionError(f"acted on {ref}, which is not a candidate")
        submit = input_name is None and self._submits(snap, target)
        if submit:
            self.submitted.add(form(snap))
        value = self.inputs.get(input_name) if input_name else None
        self.secret_just_typed = value is not None and value.sensitive
        if self.secret_just_typed:
            self.armed.add(form(snap))
        key = control_key(snap, ref)
        self.pending = _Pending(key, snap, changed, input=input_name, submit=submit)
