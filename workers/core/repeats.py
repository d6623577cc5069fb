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

Nothing here leaves the process (a screen is kept as a hash, a control by its identifier),
and every reason is scrubbed of the run's input values before a decider, a row or a result
sees it. Each snapshot is read at most once per part (`View`), and only the parts a rule asks
for.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field

from workers.core.memory import role
from workers.core.model import NONE, Candidate, Decision, Inputs, Kind, Node, Snapshot
from workers.core.projection import kind_of

MAX_ERROR_CHARS = 120
_NOT_SUBMITS = frozenset({Kind.SWITCH, Kind.CHECKBOX, Kind.LINK})
"""Presses that never count as a credential submit: toggles ("Show password") and links
("Forgot password?")."""


Control = tuple[str, str, int]
"""A control: its role, its identifier (or name), its place among look-alikes."""
_ROLES = {kind: role(kind) for kind in Kind}


@functools.lru_cache(maxsize=1024)
def _static(type_: str, role_: str, hittable: bool | None) -> bool:  # noqa: FBT001 - a cache key
    return kind_of(Node(ref="e0", type=type_, role=role_, hittable=hittable)) is Kind.TEXT


class View:
    """What the rules need of one snapshot, each part read once and only when asked."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    @functools.cached_property
    def keys(self) -> dict[str, Control]:
        """Candidate ref → its control."""
        ids = {n.ref: n.identifier for n in self.snap.nodes}
        keys: dict[str, Control] = {}
        seen: dict[tuple[str, str], int] = {}
        for c in self.snap.candidates:
            base = (_ROLES[c.kind], ids.get(c.ref) or c.name)
            ordinal = seen.get(base, 0)
            seen[base] = ordinal + 1
            keys[c.ref] = (*base, ordinal)
        return keys

    def shows(self, key: Control) -> str | None:
        """What the control `key` shows (None: not on this screen)."""
        ref = next((r for r, k in self.keys.items() if k == key), None)
        return None if ref is None else next(n.value for n in self.snap.nodes if n.ref == ref)

    @functools.cached_property
    def look(self) -> int:
        """The screen exactly as it looks (rule 1), without refs or generations."""
        return hash(
            tuple(
                (n.type, n.role, n.label, n.value, n.enabled, n.identifier, n.secure)
                for n in self.snap.nodes
            )
        )

    @functools.cached_property
    def form(self) -> tuple[Control, ...]:
        """The control keys of its text fields (rule 2's distinct screen)."""
        return tuple(self.keys[c.ref] for c in self.snap.candidates if c.kind.fillable)

    @functools.cached_property
    def texts(self) -> Counter[str]:
        """Its static texts, in screen order."""
        texts: Counter[str] = Counter()
        for n in self.snap.nodes:
            if n.ref not in self.keys and _static(n.type, n.role, n.hittable):
                text = " ".join((n.label or n.value).split())
                if text:
                    texts[text] += 1
        return texts


@dataclass(frozen=True)
class _Pending:
    """The last action made, judged at the next snapshot."""

    key: Control
    before: View
    changed: bool
    input: str | None = None
    """The input name a fill typed; None for a press."""
    submit: bool = False


@dataclass
class Repeats:
    """One run's memory of what it pressed and typed (see the module docstring)."""

    inputs: Inputs
    futile: dict[tuple[int, Control], str] = field(default_factory=dict)
    """(how the screen looked, control) → what pressing it there did ("" for nothing, else
    the error text it brought up)."""
    submitted: set[tuple[Control, ...]] = field(default_factory=set)
    """Forms on which credentials were submitted."""
    armed: set[tuple[Control, ...]] = field(default_factory=set)
    """Forms on which a secret was typed."""
    secret_just_typed: bool = False
    holds: dict[Control, tuple[str, str | None]] = field(default_factory=dict)
    """Field → (the input typed into it, what it showed right after)."""
    pending: _Pending | None = None
    current: View | None = None

    def view(self, snap: Snapshot) -> View:
        if self.current is None or self.current.snap is not snap:
            self.current = View(snap)
        return self.current

    def seen(self, snap: Snapshot) -> str | None:
        """Judge the last action by this snapshot; the reason the run ends (rule 3), or None."""
        last, self.pending = self.pending, None
        if last is None:
            return None
        now = self.view(snap)
        if last.input is not None:
            shows = now.shows(last.key)
            if shows is not None:
                self.holds[last.key] = (last.input, shows)
            return None
        error = self._error(last.before, now)
        if not last.changed or error is not None:
            self.futile[now.look, last.key] = error or ""
        if last.submit and error is not None:
            return f"submitting the credentials brought up an error: {error!r}"
        return None

    def _error(self, before: View, after: View) -> str | None:
        same = list(before.keys.values()) == list(after.keys.values())
        if not same and not (before.form and before.form == after.form):
            return None  # it left the screen: new texts are the next screen's
        new = after.texts - before.texts
        if not new:
            return None
        text = next(t for t in after.texts if t in new)
        return self.inputs.scrub(text)[:MAX_ERROR_CHARS]

    def typed(self, snap: Snapshot) -> frozenset[str]:
        """Refs of the fields on `snap` this run typed into that still show what they showed
        right after (a secure field shows nothing either way)."""
        now = self.view(snap)
        return frozenset(
            ref
            for ref, key in now.keys.items()
            if (held := self.holds.get(key)) is not None and held[1] == now.shows(key)
        )

    def futile_refs(self, snap: Snapshot) -> tuple[str, ...]:
        """Refs whose press on this screen, looking exactly as it does now, changed nothing."""
        if not self.futile:
            return ()
        now = self.view(snap)
        return tuple(ref for ref, key in now.keys.items() if self.futile.get((now.look, key)) == "")

    def refusal(self, d: Decision, snap: Snapshot) -> str | None:
        """Why acting on `d` would repeat what rules 1, 2 and 4 forbid, or None."""
        target = snap.candidate(d.target)
        if target is None:
            return None
        now = self.view(snap)
        key = now.keys[target.ref]
        name = self.inputs.scrub(target.name) or target.ref
        if target.kind.fillable:
            held = self.holds.get(key)
            if d.input != NONE and held is not None and held == (d.input, now.shows(key)):
                return f"not typed again: {name!r} already holds {{{d.input}}}"
            return None
        futile = self.futile.get((now.look, key)) if self.futile else None
        if futile is not None:
            did = f"brought up {futile!r}" if futile else "changed nothing"
            return f"not pressed again: pressing {name!r} on this unchanged screen {did}"
        if self._submits(now, target) and now.form in self.submitted:
            return f"not pressed: {name!r} would submit the credentials a second time here"
        return None

    def _submits(self, now: View, target: Candidate) -> bool:
        if target.kind in _NOT_SUBMITS:
            return False
        return self.secret_just_typed or (bool(self.armed) and now.form in self.armed)

    def acted(self, snap: Snapshot, ref: str, input_name: str | None, *, changed: bool) -> None:
        """Record an action the device took (a press when `input_name` is None)."""
        now = self.view(snap)
        target = snap.candidate(ref)
        if target is None:  # the loop acts only on candidates
            raise AssertionError(f"acted on {ref}, which is not a candidate")
        submit = input_name is None and self._submits(now, target)
        if submit:
            self.submitted.add(now.form)
        value = self.inputs.get(input_name) if input_name else None
        self.secret_just_typed = value is not None and value.sensitive
        if self.secret_just_typed:
            self.armed.add(now.form)
        self.pending = _Pending(now.keys[ref], now, changed, input=input_name, submit=submit)
