"""Moves: what the device can do to bring a target on screen — scroll down, scroll up, go
back — offered to the decider as candidates of the step's one question, beside the screen's
elements (issue 43, "the loop can scroll and go back").

A move is a `Candidate` of kind `Kind.MOVE` whose ref (`m1`..`m3`) no snapshot uses, offered
only where the device can make it (`DevicePort.actions`) and the run allows it
(`RunParams.moves`). The decider answers with one ref as ever; the loop makes the move instead
of a press (`workers.core.loop`), settled, its "did anything change" read from the settle
diff, a move that changed nothing counted by the unproductive limit and not offered again on
that screen. Memory keeps a move like any choice (by its name), and the screen's memory key
leaves the moves out (they are the device's, the same on every screen).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workers.core.model import ActionKind, Candidate, Decision, Direction, Kind
from workers.core.ports import DeviceAction


@dataclass(frozen=True)
class Move:
    ref: str
    name: str
    """What the decider reads (the candidate's name)."""
    action: DeviceAction
    direction: Direction | None = None

    @property
    def kind(self) -> ActionKind:
        return ActionKind.SCROLL if self.action == "scroll" else ActionKind.BACK

    def candidate(self) -> Candidate:
        return Candidate(ref=self.ref, kind=Kind.MOVE, name=self.name)


MOVES = (
    Move("m1", "scroll down", "scroll", "down"),
    Move("m2", "scroll up", "scroll", "up"),
    Move("m3", "go back", "back"),
)
SCROLL_DOWN = MOVES[0]
_BY_REF = {m.ref: m for m in MOVES}


def offered(actions: frozenset[DeviceAction]) -> tuple[Candidate, ...]:
    """The moves a device that can do `actions` offers, as candidates."""
    return tuple(m.candidate() for m in MOVES if m.action in actions)


def move_of(ref: str) -> Move | None:
    """The move `ref` names (None: an element of the screen, or none)."""
    return _BY_REF.get(ref)


def chosen(decision: Decision) -> Move | None:
    """The move `decision` makes (None: a press, a fill, done, blocked or none)."""
    return None if decision.done or decision.blocked else move_of(decision.target)


def history_line(index: int, move: Move, *, changed: bool) -> str:
    """The line a decider reads of a move in its history (as of a press: what, then whether
    the screen changed)."""
    return f"{index}: {move.name}; {'screen changed' if changed else 'nothing changed'}"


def scrolled_down_last(history: Sequence[str]) -> bool:
    """Whether the step before was a scroll down that moved the screen (`history_line`)."""
    return bool(history) and history[-1].endswith(
        history_line(0, SCROLL_DOWN, changed=True).removeprefix("0:")
    )
