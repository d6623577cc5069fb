"""What a scripted app for `SimDevice` is made of: elements, screens, an app, and the screens
many of the apps share (`workers.devices.sim.apps` builds the apps from them).

An app is platform-neutral here; `SimDevice` renders it with iOS (XCUI types) or Android
(widget classes, resource ids, `password=true`) accessibility shapes.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Literal

ElementKind = Literal[
    "field", "secure", "code", "button", "link", "text", "switch", "app", "window"
]
TEXT_KINDS: frozenset[ElementKind] = frozenset({"field", "secure", "code"})
"""The kinds that take text (`fill`)."""
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
CODE = re.compile(r"^[0-9]{6}$")


@dataclass(frozen=True)
class Element:
    kind: ElementKind
    label: str
    id: str
    goto: str | None = None
    """The screen a press leads to (buttons and links)."""
    requires: tuple[str, ...] = ()
    """Field ids that must hold a valid value before the press goes through."""
    disabled_until_valid: bool = False
    """If True the button reports enabled=False until `requires` are valid; otherwise
    pressing it early shows `error` on the same screen."""
    error: str = ""
    wrong: str = ""
    """Shown instead of going on when `requires` are valid but one of them is not what the
    app's `account` accepts (a refused log-in): the press stays on the screen and clears
    those fields. `{email}` quotes the email field's value, as many apps do."""
    slow: bool = False
    """A network-backed transition: a "Please wait" screen first, the target after it."""
    named: bool = True
    """False: no accessible name (no label, no id), as dialog toolkits draw an entry beside
    its label: only the text before it says what it takes."""
    when_on: tuple[str, str] | None = None
    """(switch id, label): the label this element shows while that switch is on (a text
    that changes with a setting)."""


@dataclass(frozen=True)
class Screen:
    name: str
    elements: tuple[Element, ...]
    window: int = 0
    """0: everything fits. N: the elements after the title are a list of which N show at a
    time, as on a phone's screen; `SimDevice.scroll` moves it (a page less one row)."""


@dataclass(frozen=True)
class App:
    name: str
    start: str
    screens: dict[str, Screen] = field(default_factory=dict)
    success: str = "Welcome"
    account: dict[str, str] = field(default_factory=dict)
    """Field id → the one value the app accepts there (see `Element.wrong`)."""
    chrome: tuple[Element, ...] = ()
    """What the toolkit shows around every screen (the application's name, the window's
    title: `chrome`), before the screen's own elements."""
    links: dict[str, str] = field(default_factory=dict)
    """Deep link → the screen it opens (`SimDevice.open_link`)."""

    def screen(self, name: str) -> Screen:
        return self.screens[name]

    def refusal(self, element: Element, values: dict[str, str]) -> str:
        """The error pressing `element` with these field values shows when it is a refused
        log-in (`{field_id}` in `Element.wrong` quotes a field's value), else ""."""
        if not element.wrong or all(
            values.get(r) == self.account[r] for r in element.requires if r in self.account
        ):
            return ""
        return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), ""), element.wrong)


def valid(element: Element, value: str) -> bool:
    if element.kind == "code":
        return bool(CODE.fullmatch(value))
    if element.id.endswith("email"):
        return bool(EMAIL.fullmatch(value))
    return bool(value)


def titled(name: str, title: str, *elements: Element, title_id: str = "title") -> Screen:
    """A screen: its title (a text element) first, then `elements`."""
    return Screen(name, (Element("text", title, title_id), *elements))


def form_screen(
    name: str, title: str, fields: tuple[Element, ...], submit: Element, *extras: Element
) -> Screen:
    """A form screen: its title, its fields, its submit button (which needs every field
    valid: `Element.requires`), then `extras`."""
    submit = dataclasses.replace(submit, requires=tuple(f.id for f in fields))
    return titled(name, title, *fields, submit, *extras)


def chrome(app_name: str, window_title: str) -> tuple[Element, ...]:
    """An application node named `app_name` (its process / file name, as AT-SPI and XCUI
    report it) holding a window titled `window_title`: chrome, not the app's content."""
    return (Element("app", app_name, "application"), Element("window", window_title, "window"))


WAIT_SCREEN = titled("wait", "Please wait…", title_id="wait_text")
FORGOT = Element("link", "Forgot password?", "forgot", goto="forgot")
CREATE = Element("button", "Create account", "create", goto="create")


def welcome(home: str = "email") -> Screen:
    return titled(
        "welcome",
        "Welcome",
        Element("text", "You are signed in.", "welcome_body"),
        Element("button", "Sign out", "sign_out", goto=home),
        title_id="welcome_title",
    )


def email_screen(next_screen: str = "password") -> Screen:
    email = Element("field", "Email", "email")
    go = Element(
        "button", "Continue", "continue", goto=next_screen, error="Enter a valid email address"
    )
    return form_screen("email", "Sign in to Acme", (email,), go, FORGOT, CREATE)


def password_screen(next_screen: str = "welcome", *, slow: bool = False) -> Screen:
    password = Element("secure", "Password", "password")
    go = Element(
        "button", "Sign in", "sign_in", goto=next_screen, error="Enter your password", slow=slow
    )
    return form_screen("password", "Enter your password", (password,), go, FORGOT)


DEAD_ENDS = {
    "forgot": form_screen(
        "forgot",
        "Reset your password",
        (Element("field", "Email for reset link", "reset_email"),),
        Element("button", "Send link", "send"),
    ),
    "create": form_screen(
        "create",
        "Create your account",
        (Element("field", "Full name", "full_name"),),
        Element("button", "Create", "create_go"),
    ),
}


def sign_in(name: str, *after: Screen, slow: bool = False) -> App:
    """Email → password (each with its distractors) → the first of `after`, else Welcome;
    the rest of `after`, Welcome and the two dead ends are there too."""
    then = after[0].name if after else "welcome"
    return App(
        name,
        "email",
        {
            "email": email_screen(),
            "password": password_screen(then, slow=slow),
            **{screen.name: screen for screen in after},
            "welcome": welcome(),
            **DEAD_ENDS,
        },
    )
