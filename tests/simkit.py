"""Wrappers around `SimDevice` for loop tests (imported by name, as `simkit`).

`RecordingSim` is a `DevicePort`: it passes every call to the sim and records each press and
fill the loop attempted — the pinned ref, the snapshot it was pinned from, and, for the ones
that went through, the sim element it hit and what the screen showed before and after. Tests
judge the loop by what the app saw, not by what the loop says it did.

`ErrorBlind` hides the sim's error texts from the loop (an app that fails a log-in silently).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workers.core.model import ActionResult, InputValue, Platform, Snapshot
from workers.core.ports import Device
from workers.core.projection import build_snapshot
from workers.devices.sim.device import SimDevice
from workers.devices.sim.screens import WAIT_SCREEN

Shown = tuple[tuple[str, str, str, str, bool | None], ...]


@dataclass(frozen=True)
class Act:
    """One press or fill the loop made (or tried: `after` is None when the device raised)."""

    kind: Literal["press", "fill"]
    pinned: str
    snap: Snapshot | None
    """The latest snapshot when the loop acted (the one it should have pinned from)."""
    element: str
    """The sim element's id ("" when the ref named no element of that snapshot)."""
    element_kind: str
    screen: str
    """The sim screen it happened on."""
    text: str | None = None
    """What a fill typed (the literal)."""
    held: str | None = None
    """What the field held before a fill."""
    before: Shown = ()
    after: Shown | None = None


@dataclass
class RecordingSim(Device):
    inner: SimDevice
    last: Snapshot | None = None
    acts: list[Act] = field(default_factory=list)

    @property
    def platform(self) -> Platform:
        return self.inner.platform

    def snapshot(self) -> Snapshot:
        self.last = self.inner.snapshot()
        return self.last

    def press(self, pinned_ref: str) -> ActionResult:
        act = self._act("press", pinned_ref, None)
        result = self.inner.press(pinned_ref)
        self.acts[-1] = _after(act, self.inner)
        return result

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        act = self._act("fill", pinned_ref, value.reveal())
        result = self.inner.fill(pinned_ref, value)
        self.acts[-1] = _after(act, self.inner)
        return result

    def close(self) -> None:
        self.inner.close()

    def made(self) -> list[Act]:
        """The acts that went through, in order."""
        return [a for a in self.acts if a.after is not None]

    def presses(self, element: str) -> int:
        return sum(a.kind == "press" and a.element == element for a in self.made())

    def fills(self, element: str) -> int:
        return sum(a.kind == "fill" and a.element == element for a in self.made())

    def _act(self, kind: Literal["press", "fill"], pinned_ref: str, text: str | None) -> Act:
        ref = pinned_ref.removeprefix("@").split("~s")[0]
        node = next((n for n in self.last.nodes if n.ref == ref), None) if self.last else None
        element = node.identifier.rsplit("/", 1)[-1] if node else ""
        screen = self.inner.screen
        elements = () if screen == WAIT_SCREEN.name else self.inner.app.screen(screen).elements
        act = Act(
            kind=kind,
            pinned=pinned_ref,
            snap=self.last,
            element=element,
            element_kind=next((e.kind for e in elements if e.id == element), ""),
            screen=screen,
            text=text,
            held=self.inner.values.get(element),
            before=self.inner.shown(),
        )
        self.acts.append(act)
        return act


@dataclass
class ErrorBlind(Device):
    """A device whose error texts the loop cannot see (an app that fails a log-in silently,
    or an error drawn where accessibility does not reach)."""

    inner: RecordingSim

    @property
    def platform(self) -> Platform:
        return self.inner.platform

    def snapshot(self) -> Snapshot:
        snap = self.inner.snapshot()
        nodes = [n for n in snap.nodes if not n.identifier.endswith("error")]
        return build_snapshot(nodes, snap.refs_generation)

    def press(self, pinned_ref: str) -> ActionResult:
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        return self.inner.fill(pinned_ref, value)

    def close(self) -> None:
        self.inner.close()


def _after(act: Act, sim: SimDevice) -> Act:
    return Act(**{**act.__dict__, "after": sim.shown()})
