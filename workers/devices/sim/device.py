"""`SimDevice`: an in-process device port over a scripted app (the fake beside `DevicePort`).

It behaves like agent-device where the loop can tell: refs `eN`, a `refsGeneration` per
snapshot and per settle, mutations only through pinned refs (`@e5~s652468`) with the four
stale-ref reasons, a settle diff (additions/removals) with the refs of added controls, secure
fields that never show their text, configurable latencies, deterministic fault injection and
a seed. The fleet's demo, tests, load tests and benchmarks run on it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from workers.core.errors import (
    DeviceNotFoundError,
    EmptySnapshotError,
    FatalDeviceError,
    StaleRefError,
    TransientDeviceError,
)
from workers.core.model import ActionResult, Direction, InputValue, Node, Platform, Snapshot
from workers.core.ports import WAIT_POLL_S, Device, DeviceAction
from workers.core.projection import build_snapshot
from workers.core.shots import Screenshot
from workers.devices.pictures import Widget, draw_screen
from workers.devices.sim.apps import make_app
from workers.devices.sim.options import (
    DEFAULT_SIM,
    NO_FAULTS,
    ZERO_LATENCY,
    Faults,
    Latencies,
    SimOptions,
)
from workers.devices.sim.screens import TEXT_KINDS, WAIT_SCREEN, App, Element, Screen, valid

__all__ = [
    "DEFAULT_SIM",
    "NO_FAULTS",
    "ZERO_LATENCY",
    "Faults",
    "Latencies",
    "SimDevice",
    "SimOptions",
    "action_log",
    "make_sim_device",
]

_NODE_TYPES: dict[str, tuple[str, str]] = {
    # element kind: (iOS XCUI type, Android widget class)
    "field": ("XCUIElementTypeTextField", "android.widget.EditText"),
    "secure": ("XCUIElementTypeSecureTextField", "android.widget.EditText"),
    "code": ("XCUIElementTypeTextField", "android.widget.EditText"),
    "button": ("XCUIElementTypeButton", "android.widget.Button"),
    "link": ("XCUIElementTypeButton", "android.widget.TextView"),
    "text": ("XCUIElementTypeStaticText", "android.widget.TextView"),
    "switch": ("XCUIElementTypeSwitch", "android.widget.Switch"),
    "app": ("XCUIElementTypeApplication", "android.widget.FrameLayout"),
    "window": ("XCUIElementTypeWindow", "android.widget.FrameLayout"),
}
"""How each element kind renders, in the platform's accessibility types."""
PINNED = re.compile(r"^@(e[0-9]+)~s([0-9]+)$")
SPEC = re.compile(r"^sim:(?P<app>[a-z]+)-(?P<platform>ios|android)$")


@dataclass
class _Frame:
    generation: int
    refs: dict[str, str]
    """ref → element id."""
    expired: bool = False


@dataclass
class SimDevice(Device):
    """A simulated device running one scripted app."""

    app: App
    platform_: Platform = Platform.IOS
    latencies: Latencies = ZERO_LATENCY
    faults: Faults = NO_FAULTS
    seed: int = 0
    sleep: Callable[[float], None] = time.sleep
    session_log: Path | None = None
    """If set, `open`/`close` lines (pid, monotonic ns) are appended, and one JSON line per
    command to its `action_log` beside it: overlap checks."""
    screen: str = ""
    values: dict[str, str] = field(default_factory=dict)
    commands: int = 0
    closed: bool = False
    _rng: random.Random = field(init=False)
    _generation: int = field(init=False)
    _frames: dict[int, _Frame] = field(default_factory=dict)
    _errors: dict[str, str] = field(default_factory=dict)
    _pending: str | None = None
    _sensitive: set[str] = field(default_factory=set)
    """Fields that hold a sensitive value: shown as dots like a secure field (the adapter
    masks secrets it typed, so the sim does too)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _quick: bool = False
    _stack: list[str] = field(default_factory=list)
    """The back stack: the screens a press left, newest last."""
    _scrolled: dict[str, int] = field(default_factory=dict)
    """Screen → the index of the first list row shown (`Screen.window`)."""
    _focus: str | None = None
    """The text field typed into last (where the keyboard's enter goes: `submit`)."""

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._generation = 652_000 + self._rng.randrange(1000)
        self.screen = self.screen or self.app.start
        self._log_session("open")

    # -- DevicePort -------------------------------------------------------------------------

    @property
    def platform(self) -> Platform:
        return self.platform_

    def snapshot(self) -> Snapshot:
        with self._acting("snapshot"):
            return self._snapshot()

    def press(self, pinned_ref: str) -> ActionResult:
        quick, self._quick = self._quick, False  # the hint is for this action only
        with self._acting("press"):
            return self._press_ref(pinned_ref, quick=quick)

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        quick, self._quick = self._quick, False
        with self._acting("fill"):
            return self._fill(pinned_ref, value, quick=quick)

    def screenshot(self) -> Screenshot:
        """The current screen drawn as a person would see it (`DevicePort.screenshot`): a plain
        field shows what was typed into it (a one-time code too: the pixels are the app's),
        a secure field dots. Not a command: fault injection and the command count ignore it;
        the refs are the last snapshot's (the sim numbers them by position)."""
        widgets = []
        for el, node in self._render():
            value = self.values.get(el.id, "")
            shown = "•" * len(value) if el.kind == "secure" else value
            widgets.append(
                Widget(node.ref, el.kind, node.label or el.label, shown, node.enabled is not False)
            )
        return draw_screen(widgets)

    def expect_known_screen(self) -> bool:
        """The next press or fill repeats a remembered one: it skips the settle window
        (`Latencies.settle_ms`), its effect read at once, as a real device reads it from the
        snapshots that follow."""
        self._quick = True
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._log_session("close")

    # -- device actions: a real device's scroll, back, launch, open, submit and wait -------

    def actions(self) -> frozenset[DeviceAction]:
        return frozenset({"scroll", "back", "launch", "relaunch", "open", "submit", "wait"})

    def scroll(self, direction: Direction) -> ActionResult:
        """Move the screen's list (`Screen.window`) a page less one row; a screen that fits,
        or a list at its end, changes nothing."""
        with self._acting("scroll"):
            return self._changing(lambda: self._scroll(direction))

    def back(self) -> ActionResult:
        """The screen the last press came from (the app's back stack); none: nothing."""
        with self._acting("back"):
            return self._changing(self._back)

    def launch(self, *, relaunch: bool = False) -> ActionResult:
        """`relaunch`: the app starts again on its first screen, its fields empty and its
        back stack gone (its settings, the switches, are kept as an app's data is); `launch`
        of the running app brings it to the front: nothing changes."""
        with self._acting("relaunch" if relaunch else "launch"):
            return self._changing(self._relaunch if relaunch else lambda: None)

    def open_link(self, target: str) -> ActionResult:
        screen = self.app.links.get(target)
        if screen is None:
            known = ", ".join(sorted(self.app.links)) or "none"
            raise FatalDeviceError(
                f"the app opens no link {target!r}",
                code="COMMAND_FAILED",
                hint=f"its links: {known}",
            )
        with self._acting("open"):
            return self._changing(lambda: self._go(screen))

    def submit(self) -> ActionResult:
        """The keyboard's enter on the field typed into last: the screen's button that needs
        that field is pressed, as a form's Go does; no field typed into: nothing."""
        with self._acting("submit"):
            return self._changing(self._submit)

    def wait(self, text: str, timeout_s: float) -> bool:
        """Snapshots until `text` shows (a slow transition completes at a snapshot), within
        `timeout_s` of the device's own sleep."""
        for _ in range(max(1, round(timeout_s / WAIT_POLL_S)) + 1):
            if self.snapshot().shows(text):
                return True
            self.sleep(WAIT_POLL_S)
        return False

    def _changing(self, change: Callable[[], None]) -> ActionResult:
        self._command()
        self._acted(self.latencies.press_ms, quick=False)
        before = self._render()
        change()
        return self._settle(before, quick=False)

    def _scroll(self, direction: Direction) -> None:
        screen = self._current()
        rows = len(screen.elements) - 1
        if not screen.window or rows <= screen.window or direction not in {"up", "down"}:
            return
        step = max(1, screen.window - 1) * (1 if direction == "down" else -1)
        first = self._scrolled.get(screen.name, 0) + step
        self._scrolled[screen.name] = min(max(0, first), rows - screen.window)

    def _back(self) -> None:
        if self._stack:
            self.screen, self._pending = self._stack.pop(), None  # a slow load is abandoned
            self._errors.pop(self.screen, None)

    def _relaunch(self) -> None:
        self.screen, self._pending, self._focus = self.app.start, None, None
        self._stack.clear()
        self._scrolled.clear()
        self._errors.clear()
        for el in (e for screen in self.app.screens.values() for e in screen.elements):
            if el.kind in TEXT_KINDS:
                self.values.pop(el.id, None)

    def _submit(self) -> None:
        focus = self._focus
        for el in self._current().elements:
            if focus is not None and el.kind in {"button", "link"} and focus in el.requires:
                self._press(el)
                return

    def _go(self, screen: str) -> None:
        if screen != self.screen:
            self._stack.append(self.screen)
            self.screen = screen

    # -- the commands -----------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        n = self._command()
        self._wait(self.latencies.snapshot_ms)
        if n in self.faults.empty_snapshot_on:
            raise _empty_tree()
        if self._pending is not None:  # a slow transition completes between snapshots
            self.screen, self._pending = self._pending, None
        rendered = self._render()
        if not rendered:  # the app closed its window (a screen with nothing on it)
            raise _empty_tree()
        frame = self._new_frame(rendered)
        return build_snapshot([n for _, n in rendered], str(frame.generation))

    def _press_ref(self, pinned_ref: str, *, quick: bool) -> ActionResult:
        n = self._command()
        element = self._resolve(pinned_ref, n)
        self._acted(self.latencies.press_ms, quick=quick)
        before = self._render()
        self._press(element)
        return self._settle(before, quick=quick)

    def _fill(self, pinned_ref: str, value: InputValue, *, quick: bool) -> ActionResult:
        n = self._command()
        element = self._resolve(pinned_ref, n)
        if element.kind not in TEXT_KINDS:
            raise FatalDeviceError(
                f"{pinned_ref} is not a text field",
                code="COMMAND_FAILED",
                hint="fill only text fields; press anything else",
            )
        self._acted(self.latencies.fill_ms, quick=quick)
        before = self._render()
        self.values[element.id] = value.reveal()
        if value.sensitive:
            self._sensitive.add(element.id)
        else:
            self._sensitive.discard(element.id)
        self._errors.pop(self.screen, None)
        self._focus = element.id
        return self._settle(before, quick=quick)

    # -- what the app does ------------------------------------------------------------------

    def _press(self, element: Element) -> None:
        if element.kind == "switch":
            self.values[element.id] = "" if self.values.get(element.id) else "1"
            return
        if element.requires and not self._satisfied(element):
            if not element.disabled_until_valid and element.error:
                self._errors[self.screen] = element.error
            return
        if refused := self.app.refusal(element, self.values):  # its error, the fields cleared
            self._errors[self.screen] = refused
            self.values.update(dict.fromkeys(element.requires, ""))
            return
        self._errors.pop(self.screen, None)
        if element.goto is None:
            return
        self._stack.append(self.screen)
        if element.slow:
            self.screen, self._pending = WAIT_SCREEN.name, element.goto
            self._wait(self.latencies.network_ms)
        else:
            self.screen = element.goto

    def _satisfied(self, element: Element) -> bool:
        screen = self._current()
        fields = {e.id: e for e in screen.elements}
        return all(
            r in fields and valid(fields[r], self.values.get(r, "")) for r in element.requires
        )

    def _current(self) -> Screen:
        if self.screen == WAIT_SCREEN.name:
            return WAIT_SCREEN
        return self.app.screen(self.screen)

    def shown(self) -> tuple[tuple[str, str, str, str, bool | None], ...]:
        """(id, type, label, value, enabled) of each element shown now; takes no command."""
        return tuple((el.id, n.type, n.label, n.value, n.enabled) for el, n in self._render())

    # -- rendering in the platform's accessibility shapes -----------------------------------

    def _render(self) -> list[tuple[Element, Node]]:
        screen = self._current()
        out: list[tuple[Element, Node]] = []
        shown = list(screen.elements)
        if screen.window:  # the title, then the rows the list shows now
            first = self._scrolled.get(screen.name, 0) + 1
            shown = [shown[0], *shown[first : first + screen.window]]
        elements = [*self.app.chrome, *shown]
        if screen.name in self._errors:  # under the screen's title
            elements.insert(
                len(self.app.chrome) + 1, Element("text", self._errors[screen.name], "error")
            )
        for i, el in enumerate(elements, start=1):
            out.append((el, self._node(f"e{i}", el)))
        return out

    def _node(self, ref: str, el: Element) -> Node:
        if el.when_on is not None and self.values.get(el.when_on[0]):
            el = dataclasses.replace(el, label=el.when_on[1])
        value = self.values.get(el.id, "")
        secure = el.kind == "secure"
        if value and (secure or el.id in self._sensitive):
            value = "•" * len(value)  # what the platform shows; never the literal
        enabled = True
        if el.disabled_until_valid and not self._satisfied(el):
            enabled = False
        android = self.platform_ is Platform.ANDROID
        holds_text = el.kind in TEXT_KINDS
        if el.kind == "switch":  # on or off, as both platforms report a switch's state
            value = "1" if value else "0"
        return Node(
            ref=ref,
            type=_NODE_TYPES[el.kind][1 if android else 0],
            # a filled Android EditText shows its text instead of its hint
            label="" if (android and holds_text and value) or not el.named else el.label,
            value=value if holds_text or not android or el.kind == "switch" else "",
            identifier="" if not el.named else f"com.acme.app:id/{el.id}" if android else el.id,
            enabled=enabled,
            hittable=not android or el.kind != "text",
            secure=secure,
        )

    # -- refs, frames and the settle diff ---------------------------------------------------

    def _new_frame(self, rendered: list[tuple[Element, Node]]) -> _Frame:
        for f in self._frames.values():
            f.expired = True
        self._generation += 1
        frame = _Frame(self._generation, {node.ref: el.id for el, node in rendered})
        self._frames = {frame.generation: frame}
        return frame

    def _resolve(self, pinned_ref: str, command: int) -> Element:
        m = PINNED.fullmatch(pinned_ref)
        if m is None:
            raise StaleRefError(
                f"{pinned_ref!r} is not pinned to a snapshot",
                reason="plain_ref_requires_complete_frame",
            )
        ref, gen = m.group(1), int(m.group(2))
        frame = self._frames.get(gen)
        if frame is None:
            raise StaleRefError(
                f"{pinned_ref} names generation {gen}, current is {self._generation}",
                reason="ref_generation_mismatch",
            )
        if frame.expired or command in self.faults.stale_on or self._roll(self.faults.stale_rate):
            raise StaleRefError(f"{pinned_ref}: the frame expired", reason="ref_frame_expired")
        element_id = frame.refs.get(ref)
        if element_id is None:
            raise StaleRefError(
                f"{ref} was not issued in generation {gen}", reason="ref_not_issued"
            )
        for el in self._current().elements:
            if el.id == element_id:
                return el
        raise StaleRefError(f"{pinned_ref}: the frame expired", reason="ref_frame_expired")

    def _acted(self, ms: float, *, quick: bool) -> None:
        """Wait out an action's latency, less the settle window after the hint."""
        self._wait(ms - self.latencies.settle_ms if quick else ms)

    def _settle(self, before: list[tuple[Element, Node]], *, quick: bool) -> ActionResult:
        after = self._render()
        old = Counter(_line(n) for _, n in before)
        new = Counter(_line(n) for _, n in after)
        added = new - old
        removed = old - new
        frame = self._new_frame(after)
        added_lines = set(added)
        added_refs = tuple(n.ref for _, n in after if _line(n) in added_lines)
        return ActionResult(
            changed=bool(added or removed),
            settled=self._pending is None,
            settle_skipped=quick,
            additions=sum(added.values()),
            removals=sum(removed.values()),
            refs_generation=str(frame.generation),
            added_refs=added_refs,
        )

    # -- commands, latency and faults -------------------------------------------------------

    def _command(self) -> int:
        if self.closed:
            raise FatalDeviceError("the sim session is closed", code="SESSION_NOT_FOUND")
        self.commands += 1
        n = self.commands
        after = self.faults.disconnect_after
        if after is not None and n > after:
            raise DeviceNotFoundError(
                "the device disconnected", hint="check the simulator/emulator is running"
            )
        if n in self.faults.transient_on or self._roll(self.faults.transient_rate):
            raise TransientDeviceError("device is in use by another session", code="DEVICE_IN_USE")
        return n

    def _roll(self, rate: float) -> bool:
        return rate > 0 and self._rng.random() < rate

    def _wait(self, ms: float) -> None:
        if ms <= 0:
            return
        j = self.latencies.jitter
        self.sleep(ms * (1 + self._rng.uniform(-j, j)) / 1000)

    def _log_session(self, what: str) -> None:
        if self.session_log is None:
            return
        with self._lock, self.session_log.open("a") as f:
            f.write(f"{what} {os.getpid()} {time.monotonic_ns()}\n")

    @contextlib.contextmanager
    def _acting(self, command: str) -> Iterator[None]:
        """Time one command (a failed one too) into the action log: who drove the device
        (pid), for which run (seed), from when to when (monotonic ns, one clock per machine)."""
        if self.session_log is None:
            yield
            return
        start = time.monotonic_ns()
        try:
            yield
        finally:
            line = {"pid": os.getpid(), "seed": self.seed, "command": command}
            line |= {"start_ns": start, "end_ns": time.monotonic_ns()}
            with self._lock, action_log(self.session_log).open("a") as f:
                f.write(json.dumps(line) + "\n")


def action_log(session_log: Path) -> Path:
    """Where a sim device with `session_log` records each command's interval (JSON lines)."""
    return session_log.with_name(session_log.name + ".actions.jsonl")


def _empty_tree() -> EmptySnapshotError:
    return EmptySnapshotError(
        "the device returned an empty accessibility tree",
        hint="check the app is in the foreground and accessibility is reachable",
    )


def _line(node: Node) -> str:
    return f"{node.type}|{node.label}|{node.value}|{node.enabled}"


def make_sim_device(
    spec: str,
    *,
    latency_scale: float = 0.0,
    seed: int = 0,
    faults: Faults = NO_FAULTS,
    session_log: Path | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> SimDevice:
    """`sim:signin-ios`, `sim:code-android`, … → a SimDevice. Raises ValueError naming the fix."""
    m = SPEC.fullmatch(spec)
    if m is None:
        raise ValueError(
            f"device spec {spec!r} is not a sim spec; use sim:<app>-<ios|android>, "
            "e.g. sim:signin-ios"
        )
    latencies = Latencies().scaled(latency_scale) if latency_scale > 0 else ZERO_LATENCY
    return SimDevice(
        app=make_app(m.group("app"), seed),
        platform_=Platform(m.group("platform")),
        latencies=latencies,
        faults=faults,
        seed=seed,
        sleep=sleep,
        session_log=session_log,
    )
