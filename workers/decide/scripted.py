"""`ScriptedDecider`: the fake beside the `Decider` seam (like pydantic-ai's `FunctionModel`).

    ScriptedDecider(lambda state: Decision(done=True))             # one function for every step
    ScriptedDecider([fill("Email", "email"), press("Continue"),    # one entry per step, in order
                     Decision(done=True)])
    decider.seen                                                   # every state it was asked

An entry is a `Decision` or a function of the `DecideState`. `fill`/`press` pick a candidate by
name on the screen they are asked about, so a script does not depend on ref numbering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeAlias

from workers.core.model import DecideState, Decision

DecideFn: TypeAlias = Callable[[DecideState], Decision]
Entry: TypeAlias = Decision | DecideFn


class ScriptError(AssertionError):
    """The script does not fit the run (it ran out, or names a candidate not on screen): a test bug,
    so it propagates out of `run_goal` instead of becoming a run status."""


class ScriptedDecider:
    """Answers from a function, or from a list of entries consumed one per call."""

    def __init__(self, script: DecideFn | Iterable[Entry], *, then: Entry | None = None) -> None:
        """`then` answers every call after a list runs out (default: raise)."""
        self._fn: DecideFn | None = script if callable(script) else None
        self._entries: list[Entry] = [] if callable(script) else list(script)
        self._then = then
        self.seen: list[DecideState] = []
        """Every state this decider was asked about, in order."""

    @property
    def remaining(self) -> int:
        return len(self._entries)

    def decide(self, state: DecideState) -> Decision:
        self.seen.append(state)
        if self._fn is not None:
            return self._fn(state)
        if self._entries:
            entry = self._entries.pop(0)
        elif self._then is not None:
            entry = self._then
        else:
            raise ScriptError(
                f"ScriptedDecider was asked for step {state.step} after its script ran out "
                f"({len(self.seen) - 1} entries answered)"
            )
        return entry if isinstance(entry, Decision) else entry(state)


def _by_name(state: DecideState, name: str) -> str:
    wanted = name.casefold()
    for c in state.candidates:
        if c.name.casefold() == wanted:
            return c.ref
    names = ", ".join(repr(c.name) for c in state.candidates) or "none"
    raise ScriptError(f"no candidate named {name!r} on this screen (candidates: {names})")


def press(name: str, *, confidence: float = 1.0) -> DecideFn:
    """An entry that presses the candidate named `name` (case-insensitive)."""

    def entry(state: DecideState) -> Decision:
        return Decision(target=_by_name(state, name), confidence=confidence)

    return entry


def fill(name: str, input_name: str, *, confidence: float = 1.0) -> DecideFn:
    """An entry that types input `input_name` into the text field named `name`."""

    def entry(state: DecideState) -> Decision:
        return Decision(target=_by_name(state, name), input=input_name, confidence=confidence)

    return entry


def done(reason: str = "scripted: done") -> Decision:
    return Decision(done=True, reason=reason)


def blocked(reason: str = "scripted: blocked") -> Decision:
    return Decision(blocked=True, reason=reason)
