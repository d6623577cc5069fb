"""Candidate projection: each platform's element types → one platform-neutral `Kind`.

agent-device bug #2656 was a real Android hierarchy fed into iOS-keyed roles, which gave zero
candidates. Here every platform's vocabulary maps into one table, keyed by a normalised type:

- iOS XCUI types: `XCUIElementTypeSecureTextField` → `securetextfield`
- Android widget classes: `android.widget.EditText` → `edittext`
- agent-device's normalized `type` (`text-field`, `button`) and raw AT-SPI `role`
  (`push button`, `password text`) → `textfield`, `pushbutton`, `passwordtext`

A candidate is an interactive kind that is enabled and hittable where the platform reports it
(None means "not reported", which counts as yes). A few static texts are kept as context.
"""

from __future__ import annotations

import functools
import re

from workers.core.labels import neighbour_names
from workers.core.model import Candidate, Kind, Node, Snapshot, fingerprint

MAX_CONTEXT_TEXTS = 8
MAX_CONTEXT_CHARS = 60
MAX_NAME_CHARS = 60

_KINDS: dict[str, Kind] = {
    # buttons
    "button": Kind.BUTTON,
    "pushbutton": Kind.BUTTON,
    "imagebutton": Kind.BUTTON,
    "materialbutton": Kind.BUTTON,
    "floatingactionbutton": Kind.BUTTON,
    "appcompatbutton": Kind.BUTTON,
    "menubutton": Kind.BUTTON,
    "segmentedcontrol": Kind.BUTTON,
    "radiobutton": Kind.CHECKBOX,
    # text entry
    "textfield": Kind.TEXT_FIELD,
    "textview": Kind.TEXT,  # Android TextView is text; iOS XCUIElementTypeTextView is below
    "xcuitextview": Kind.TEXT_FIELD,
    "searchfield": Kind.TEXT_FIELD,
    "edittext": Kind.TEXT_FIELD,
    "appcompatedittext": Kind.TEXT_FIELD,
    "textinputedittext": Kind.TEXT_FIELD,
    "autocompletetextview": Kind.TEXT_FIELD,
    "entry": Kind.TEXT_FIELD,
    "text": Kind.TEXT_FIELD,  # AT-SPI role "text" is an editable entry
    "input": Kind.TEXT_FIELD,
    "textbox": Kind.TEXT_FIELD,
    "securetextfield": Kind.SECURE_TEXT_FIELD,
    "passwordtext": Kind.SECURE_TEXT_FIELD,
    "password": Kind.SECURE_TEXT_FIELD,
    # toggles
    "switch": Kind.SWITCH,
    "toggle": Kind.SWITCH,
    "togglebutton": Kind.SWITCH,
    "switchcompat": Kind.SWITCH,
    "switchmaterial": Kind.SWITCH,
    "checkbox": Kind.CHECKBOX,
    "checkedtextview": Kind.CHECKBOX,
    # navigation
    "link": Kind.LINK,
    "tab": Kind.TAB,
    "pagetab": Kind.TAB,
    "tabview": Kind.TAB,
    "tabbarbutton": Kind.TAB,
    "cell": Kind.CELL,
    "tablecell": Kind.CELL,
    "listitem": Kind.CELL,
    "menuitem": Kind.MENU_ITEM,
    "slider": Kind.SLIDER,
    "seekbar": Kind.SLIDER,
    "picker": Kind.PICKER,
    "pickerwheel": Kind.PICKER,
    "spinner": Kind.PICKER,
    "combobox": Kind.PICKER,
    # static
    "statictext": Kind.TEXT,
    "label": Kind.TEXT,
    "heading": Kind.TEXT,
    "image": Kind.IMAGE,
    "imageview": Kind.IMAGE,
    "icon": Kind.IMAGE,
    "other": Kind.CONTAINER,
    "group": Kind.CONTAINER,
    "window": Kind.CONTAINER,
    "frame": Kind.CONTAINER,
    "panel": Kind.CONTAINER,
    "filler": Kind.CONTAINER,
    "application": Kind.CONTAINER,
    "linearlayout": Kind.CONTAINER,
    "framelayout": Kind.CONTAINER,
    "relativelayout": Kind.CONTAINER,
    "constraintlayout": Kind.CONTAINER,
    "viewgroup": Kind.CONTAINER,
    "scrollview": Kind.CONTAINER,
    "recyclerview": Kind.CONTAINER,
    "view": Kind.CONTAINER,
    # agent-device's Linux (AT-SPI) normalised types not named above
    "textarea": Kind.TEXT_FIELD,
    "treeitem": Kind.CELL,
    "dialog": Kind.CONTAINER,
    "alert": Kind.CONTAINER,
    "scrollarea": Kind.CONTAINER,
    "list": Kind.CONTAINER,
    "table": Kind.CONTAINER,
    "row": Kind.CONTAINER,
    "toolbar": Kind.CONTAINER,
    "statusbar": Kind.CONTAINER,
    "menubar": Kind.CONTAINER,
    "menu": Kind.CONTAINER,
    "tablist": Kind.CONTAINER,
    "titlebar": Kind.CONTAINER,
    "separator": Kind.CONTAINER,
    "scrollbar": Kind.CONTAINER,
    "progressbar": Kind.CONTAINER,
}

_XCUI_PREFIX = "xcuielementtype"


@functools.lru_cache(maxsize=1024)
def normalise_type(raw: str) -> str:
    """`XCUIElementTypeSecureTextField` → `securetextfield`; `android.widget.EditText` →
    `edittext`; `push button` → `pushbutton`; `text-field` → `textfield`. Remembered per raw
    type (a platform has a few dozen; every node of every snapshot asks)."""
    t = raw.strip()
    if "." in t:  # a Java class name: keep the simple name, drop inner-class suffixes
        t = t.rsplit(".", 1)[1].split("$")[-1]
    t = re.sub(r"[^a-z0-9]", "", t.casefold())
    if t.startswith(_XCUI_PREFIX):
        t = t.removeprefix(_XCUI_PREFIX)
        if t == "textview":  # an iOS text view is editable
            return "xcuitextview"
    return t


def kind_of(node: Node) -> Kind:
    """The neutral kind of a node: by `type`, then by raw `role`; secure wins from either.

    agent-device normalises AT-SPI `password text` to type `TextField`; the raw role keeps
    the secure bit, so a text field whose role (or `secure` flag) says secure is secure.
    """
    found = [_KINDS.get(normalise_type(raw)) for raw in (node.type, node.role) if raw]
    kinds = [k for k in found if k is not None]
    kind = kinds[0] if kinds else Kind.OTHER
    secure = node.secure or Kind.SECURE_TEXT_FIELD in kinds
    if secure and kind in {Kind.TEXT_FIELD, Kind.SECURE_TEXT_FIELD}:
        return Kind.SECURE_TEXT_FIELD
    # A hittable Android TextView is how many apps draw "Forgot password?": a link.
    if kind is Kind.TEXT and node.hittable is True and normalise_type(node.type) == "textview":
        return Kind.LINK
    return kind


def _name(node: Node) -> str:
    name = node.label or node.identifier.rsplit("/", 1)[-1].replace("_", " ")
    return " ".join(name.split())[:MAX_NAME_CHARS]


def is_candidate(node: Node, kind: Kind) -> bool:
    return kind.interactive and node.enabled is not False and node.hittable is not False


def project(nodes: list[Node] | tuple[Node, ...]) -> tuple[tuple[Candidate, ...], tuple[str, ...]]:
    """Candidates and the capped static context texts, as `build_snapshot` makes them."""
    return candidates_of(nodes), context_of(screen_texts(nodes))


def candidates_of(nodes: list[Node] | tuple[Node, ...]) -> tuple[Candidate, ...]:
    """The elements a decider may choose: interactive, enabled and hittable."""
    candidates: list[Candidate] = []
    kinds = [kind_of(node) for node in nodes]
    names = [_name(node) for node in nodes]
    inferred = neighbour_names(nodes, kinds, names)  # a nameless field: the label beside it
    for node, kind, own in zip(nodes, kinds, names, strict=True):
        if is_candidate(node, kind):
            value = "" if kind is Kind.SECURE_TEXT_FIELD else node.value[:MAX_NAME_CHARS]
            guess = inferred.get(node.ref, "")[:MAX_NAME_CHARS]
            candidates.append(
                Candidate(
                    ref=node.ref, kind=kind, name=own or guess, value=value, inferred=bool(guess)
                )
            )
    return tuple(candidates)


def screen_texts(nodes: list[Node] | tuple[Node, ...]) -> tuple[str, ...]:
    """What the app's content says: each static text's label (or value), once, in screen
    order, uncapped. Never a container's label: the application's (process) name, a window's
    or a dialog's title, a frame or a toolbar are the toolkit's chrome, not the screen's
    text (a signed-in app named `cookie-consent-demo` shows no consent dialog)."""
    texts: dict[str, None] = {}
    for node in nodes:
        if kind_of(node) is Kind.TEXT and (text := " ".join((node.label or node.value).split())):
            texts[text] = None
    return tuple(texts)


def context_of(texts: tuple[str, ...]) -> tuple[str, ...]:
    """The few static texts a decider is told (`MAX_CONTEXT_TEXTS`, each cut at
    `MAX_CONTEXT_CHARS`)."""
    context: dict[str, None] = {}
    for text in texts:
        if len(context) == MAX_CONTEXT_TEXTS:
            break
        context[text[:MAX_CONTEXT_CHARS]] = None
    return tuple(context)


def build_snapshot(nodes: list[Node] | tuple[Node, ...], refs_generation: str) -> Snapshot:
    """The one way adapters turn a device's nodes into a `Snapshot`."""
    candidates = candidates_of(nodes)
    texts = screen_texts(nodes)
    context = context_of(texts)
    screen = context[0] if context else (candidates[0].name if candidates else "")
    return Snapshot(
        refs_generation=refs_generation,
        nodes=tuple(nodes),
        candidates=candidates,
        context=context,
        texts=texts,
        screen=screen,
        fingerprint=fingerprint(tuple(nodes)),
    )
