"""What a device shows: platform-neutral element kinds, the accessibility nodes a device
reports, the candidates a decider may choose, and one pinned snapshot."""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from workers.core.errors import ConfigError
from workers.core.words import shown

REF_PATTERN = re.compile(r"^e[0-9]+$")


class Platform(StrEnum):
    IOS = "ios"
    ANDROID = "android"
    LINUX = "linux"


class Kind(StrEnum):
    """Platform-neutral element kinds (see `workers.core.projection` for the mapping)."""

    BUTTON = "button"
    TEXT_FIELD = "text-field"
    SECURE_TEXT_FIELD = "secure-text-field"
    SWITCH = "switch"
    CHECKBOX = "checkbox"
    LINK = "link"
    TAB = "tab"
    CELL = "cell"
    MENU_ITEM = "menu-item"
    SLIDER = "slider"
    PICKER = "picker"
    TEXT = "text"
    IMAGE = "image"
    CONTAINER = "container"
    OTHER = "other"
    MOVE = "move"
    """Not an element: a move the device makes (scroll, back) offered to the decider beside
    the screen's elements (`workers.core.moves`)."""

    @property
    def fillable(self) -> bool:
        return self in {Kind.TEXT_FIELD, Kind.SECURE_TEXT_FIELD}

    @property
    def pressable(self) -> bool:
        """A control a press acts on as a choice: a button, a link, a menu item, a cell, a tab
        (platforms draw one control as any of these, so they count alike)."""
        return self in {Kind.BUTTON, Kind.LINK, Kind.MENU_ITEM, Kind.CELL, Kind.TAB}

    @property
    def stateful(self) -> bool:
        """A switch or a checkbox: its value is the app's on/off state, not typed text."""
        return self in {Kind.SWITCH, Kind.CHECKBOX}

    @property
    def interactive(self) -> bool:
        return self not in {Kind.TEXT, Kind.IMAGE, Kind.CONTAINER, Kind.OTHER}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Node(_Frozen):
    """One element of a device's accessibility tree, as the device reports it.

    `type` is the platform's own element type (XCUI `XCUIElementTypeButton`, Android
    `android.widget.EditText`, or agent-device's normalized type); `role` is the raw role
    where the platform has one (AT-SPI `push button`). `enabled`/`hittable` are None where
    the platform does not report them.
    """

    ref: str
    type: str = ""
    role: str = ""
    label: str = ""
    value: str = ""
    identifier: str = ""
    enabled: bool | None = None
    hittable: bool | None = None
    secure: bool = False
    """True for password fields (Android `password=true`, iOS SecureTextField)."""
    labelled_by: str = ""
    """The ref of the node that labels this one, where the platform reports the relation
    (AT-SPI `labelled-by`, Android `labelFor`); "" where it does not."""
    rect: tuple[int, int, int, int] | None = None
    """Its bounds (x, y, width, height) in screen pixels, where the platform reports them."""
    container: str = ""
    """An id of the node's parent, where the snapshot gives one: neighbours in one container."""


class Candidate(_Frozen):
    """An element the decider may choose: interactive, enabled and hittable."""

    ref: str
    kind: Kind
    name: str
    value: str = ""
    enabled: bool = True
    hittable: bool = True
    inferred: bool = False
    """The field has no accessible name: `name` is the label beside it
    (`workers.core.labels`), a reading of the layout rather than the app's own word."""


class Snapshot(_Frozen):
    """One interactive snapshot of the screen, pinned to a refs generation."""

    refs_generation: str
    nodes: tuple[Node, ...]
    candidates: tuple[Candidate, ...]
    context: tuple[str, ...] = ()
    """A few static texts kept so the decider can see e.g. "Welcome" (capped)."""
    texts: tuple[str, ...] = ()
    """What the app's content says: every static text, in screen order, uncapped (`context`
    is a decider's capped view of it). Never the chrome: the application's name, window
    titles and the toolkit's frames (`workers.core.projection.screen_texts`)."""
    screen: str = ""
    """A short human name for the screen (first heading/text), for step tables."""
    fingerprint: str = ""
    """Stable hash of the screen's structure: same screen, same fingerprint."""

    def candidate(self, ref: str) -> Candidate | None:
        for c in self.candidates:
            if c.ref == ref:
                return c
        return None

    def pin(self, ref: str) -> str:
        """The pinned form agent-device expects for mutations: `@e5~s652468`."""
        return pin_ref(ref, self.refs_generation)

    def shows(self, marker: str) -> bool:
        """Whether `marker` is visible: in a static text of the app's content or the name of
        a control one can use (case-insensitive; `workers.core.words.shown`, which the
        deciders ask about the same texts)."""
        return shown(marker, [*self.texts, *(c.name for c in self.candidates)])


def pin_ref(ref: str, refs_generation: str) -> str:
    return f"@{ref}~s{refs_generation}"


def require_pinned(pinned_ref: str) -> None:
    """Mutations go to pinned refs only (`pin_ref`'s form, `@e5~s652468`): ConfigError else."""
    head, sep, gen = pinned_ref.partition("~s")
    if not (sep and head.startswith("@e") and head[2:].isdigit() and gen.isdigit()):
        raise ConfigError(f"{pinned_ref!r} is not a pinned ref; pin it as @eN~sGEN (Snapshot.pin)")


def fingerprint(nodes: tuple[Node, ...] | list[Node]) -> str:
    """Hash of (type, label) pairs: values and refs may change, the screen does not."""
    h = hashlib.blake2b(digest_size=8)
    for n in nodes:
        h.update(f"{n.type}|{n.role}|{n.label}\n".encode())
    return h.hexdigest()
