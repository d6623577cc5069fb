"""Decision memory: what a fleet remembers of decisions that led to `done`, keyed so that a
later run on any device can reuse one without asking the decider.

Key (`memory_key`): the goal (normalised), the screen's platform-neutral fingerprint — each
candidate's kind, name and enabled state in order, plus the static texts — the names of the
inputs already typed, the decider's identity and `FORMAT_VERSION`. Refs, refs generations,
field values and typed text are never part of it; the state it is computed from is already
scrubbed (`Inputs.scrub_state`: "Hi ada@example.com" reads "Hi {email}"), so runs with other
inputs share an entry and no value ever reaches a key.

Value (`Remembered`): the decision in ref-independent form — which candidate (kind + name +
ordinal among identical ones) and which input name, or `done` — plus where it came from.

The loop reads before it asks the decider, maps a hit back to this screen's ref (pinned as
usual, through every guard), and verifies it: a remembered action that changes nothing or
comes back stale invalidates the entry and the same step asks the decider. Writes happen only
when a run ends `done` (`DecisionMemory.remember`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from workers.core.model import NONE, Candidate, DecideState, Decision, Kind, MemorySource

FORMAT_VERSION = 2
"""Bump when the key or value shape changes: old entries then simply miss. 2: a `done` is
remembered only once the loop accepted it on evidence (`workers.core.evidence`); a version-1
entry may hold a done no screen corroborated, so none is read."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def normalise_goal(goal: str) -> str:
    return " ".join(re.sub(r"[^\w@.' -]", " ", goal.casefold()).split())


def role(kind: Kind) -> str:
    """The kind folded to its role: platforms draw the same control differently (iOS a link
    as a button, Android a hittable TextView as a link), so every pressable kind is one
    `press` (`Kind.pressable`) and a switch or a checkbox one `toggle`; the fingerprint is
    neutral."""
    if kind.pressable:
        return "press"
    return "toggle" if kind.stateful else kind.value


def screen_fingerprint(state: DecideState) -> str:
    """Role, name and enabled state of every candidate in order, and the static texts: the
    screen as a decider sees it, without refs, generations, values or platform dialect."""
    h = hashlib.blake2b(digest_size=12)
    for c in state.candidates:
        if c.kind is Kind.MOVE:  # the device's, not the screen's: the same on every screen
            continue
        h.update(f"c|{role(c.kind)}|{c.name}|{int(c.enabled)}\n".encode())
    for text in state.context:
        h.update(f"t|{text}\n".encode())
    return h.hexdigest()


def memory_key(state: DecideState, decider: str) -> str:
    """The entry's id: a hash of goal, screen fingerprint, typed input names, decider and
    format version. `state` must already be scrubbed (the loop's states are)."""
    parts = {
        "v": FORMAT_VERSION,
        "goal": normalise_goal(state.goal),
        "screen": screen_fingerprint(state),
        "typed": sorted(state.used_inputs),
        "done_when": state.done_when or "",
        "decider": decider,
    }
    raw = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


class Target(_Frozen):
    """A candidate without its ref: kind + name, and which one among identical ones."""

    kind: Kind
    name: str
    ordinal: int = Field(default=0, ge=0)

    @classmethod
    def of(cls, candidates: tuple[Candidate, ...], ref: str) -> Target | None:
        target = next((c for c in candidates if c.ref == ref), None)
        if target is None:
            return None
        same = [c for c in candidates if _like(c, target.kind, target.name)]
        return cls(kind=target.kind, name=target.name, ordinal=same.index(target))

    def find(self, candidates: tuple[Candidate, ...]) -> Candidate | None:
        """The candidate this names on another screen render: same role and name, and the
        same place among its look-alikes."""
        same = [c for c in candidates if _like(c, self.kind, self.name)]
        return same[self.ordinal] if self.ordinal < len(same) else None


def _like(c: Candidate, kind: Kind, name: str) -> bool:
    return c.name == name and role(c.kind) == role(kind)


class Remembered(_Frozen):
    """One memory entry's value."""

    key: str
    target: Target | None = None
    input: str | None = None
    done: bool = False
    source: MemorySource
    origin: str = ""
    """The decider's identity (`rules`, `openai/gpt-4o-mini`) or, for a person, who answered."""
    goal: str = ""
    """The normalised goal (for `forget --goal`)."""
    screen: str = ""
    """The screen's name as the decider saw it (scrubbed), for `memory list`."""
    created_at: float = 0.0
    last_used_at: float = 0.0
    hits: int = 0

    def decision_for(self, state: DecideState) -> Decision | None:
        """This entry as a decision on `state`'s refs, or None when it no longer fits."""
        if self.done:
            return Decision(
                done=True,
                reason="remembered: this goal was reached on this screen",
                decided_by="memory",
                confidence_source="memory",
            )
        if self.target is None:
            return None
        c = self.target.find(state.candidates)
        if c is None or not c.enabled or c.kind.fillable != (self.input is not None):
            return None
        if self.input is not None and self.input not in state.input_names:
            return None
        return Decision(
            target=c.ref,
            input=self.input or NONE,
            confidence=1.0,
            reason=f"remembered ({self.source}): {c.name}",
            decided_by="memory",
            confidence_source="memory",
        )


def remembered_from(
    state: DecideState, decision: Decision, key: str, *, source: MemorySource, origin: str
) -> Remembered | None:
    """A decision as an entry, or None for one that is not worth remembering (blocked)."""
    base = {
        "key": key,
        "source": source,
        "origin": origin,
        "goal": normalise_goal(state.goal),
        "screen": state.screen,
    }
    if decision.done:
        return Remembered(done=True, **base)
    if decision.blocked:
        return None
    target = Target.of(state.candidates, decision.target)
    if target is None:
        return None
    return Remembered(
        target=target, input=None if decision.input == NONE else decision.input, **base
    )


class DecisionMemory(Protocol):
    """The seam to the shared memory (`workers.fleet.memory_store.RedisMemory`; the fake
    beside it is `InMemoryMemory`). `decider` is the identity entries are keyed by."""

    @property
    def decider(self) -> str: ...

    def recall(self, key: str) -> Remembered | None:
        """The live entry for `key` (its hit count and last-used time bumped), or None."""
        ...

    def remember(self, entries: Iterable[Remembered]) -> int:
        """Write entries learned by a run that ended `done`; returns how many were new."""
        ...

    def invalidate(self, key: str, why: str) -> None:
        """Drop an entry whose action did not do what it did before."""
        ...


@dataclass
class InMemoryMemory:
    """The fake beside the seam: a dict, a counter of invalidations, a fixed clock."""

    decider: str = "rules"
    entries: dict[str, Remembered] = field(default_factory=dict)
    invalidated: list[tuple[str, str]] = field(default_factory=list)
    now: float = 0.0

    def recall(self, key: str) -> Remembered | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        entry = entry.model_copy(update={"hits": entry.hits + 1, "last_used_at": self.now})
        self.entries[key] = entry
        return entry

    def remember(self, entries: Iterable[Remembered]) -> int:
        new = 0
        for e in entries:
            if e.key not in self.entries:
                new += 1
                self.entries[e.key] = e.model_copy(
                    update={"created_at": self.now, "last_used_at": self.now}
                )
        return new

    def invalidate(self, key: str, why: str) -> None:
        self.entries.pop(key, None)
        self.invalidated.append((key, why))
