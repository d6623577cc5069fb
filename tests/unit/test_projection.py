"""Candidate projection: every platform's element shapes yield the right candidates."""

from __future__ import annotations

import pytest

from workers.core.model import Kind, Node
from workers.core.projection import MAX_CONTEXT_TEXTS, build_snapshot, kind_of, project

IOS = [
    Node(ref="e1", type="XCUIElementTypeStaticText", label="Sign in to Acme"),
    Node(ref="e2", type="XCUIElementTypeTextField", label="Email", enabled=True, hittable=True),
    Node(ref="e3", type="XCUIElementTypeSecureTextField", label="Password", value="••••"),
    Node(ref="e4", type="XCUIElementTypeButton", label="Sign in", enabled=False),
    Node(ref="e5", type="XCUIElementTypeButton", label="Forgot password?", hittable=True),
    Node(ref="e6", type="XCUIElementTypeSwitch", label="Remember me"),
    Node(ref="e7", type="XCUIElementTypeImage", label="logo"),
    Node(ref="e8", type="XCUIElementTypeOther"),
    Node(ref="e9", type="XCUIElementTypeCell", label="Account", hittable=False),
]

ANDROID = [
    Node(ref="e1", type="android.widget.FrameLayout"),
    Node(ref="e2", type="android.widget.TextView", label="Welcome back", hittable=False),
    Node(
        ref="e3",
        type="android.widget.EditText",
        identifier="com.acme:id/email_input",
        enabled=True,
        hittable=True,
    ),
    Node(ref="e4", type="android.widget.EditText", label="Password", secure=True),
    Node(ref="e5", type="android.widget.Button", label="Log in", enabled=True, hittable=True),
    Node(ref="e6", type="android.widget.TextView", label="Forgot password?", hittable=True),
    Node(ref="e7", type="android.widget.CheckBox", label="Keep me signed in"),
    Node(ref="e8", type="com.google.android.material.tabs.TabLayout$TabView", label="Home"),
    Node(ref="e9", type="android.widget.ImageButton", label="Back", enabled=False),
]

# agent-device's Linux target: normalised `type`, raw AT-SPI `role`.
LINUX = [
    Node(ref="e1", type="Window", role="frame", label="Acme"),
    Node(ref="e2", type="StaticText", role="label", label="Sign in to Acme"),
    Node(ref="e3", type="TextField", role="text", label="Email", enabled=True),
    Node(ref="e4", type="TextField", role="password text", label="Password", value="•••"),
    Node(ref="e5", type="Button", role="push button", label="Sign in", enabled=True),
    Node(ref="e6", type="Link", role="link", label="Forgot password?"),
    Node(ref="e7", type="CheckBox", role="check box", label="Remember me", enabled=False),
]


def kinds(nodes: list[Node]) -> dict[str, Kind]:
    return {c.ref: c.kind for c in project(nodes)[0]}


def test_ios_shapes() -> None:
    assert kinds(IOS) == {
        "e2": Kind.TEXT_FIELD,
        "e3": Kind.SECURE_TEXT_FIELD,
        "e5": Kind.BUTTON,
        "e6": Kind.SWITCH,
    }


def test_android_shapes_yield_candidates() -> None:
    """The #2656 regression: a real Android hierarchy must not project to zero candidates."""
    candidates, context = project(ANDROID)
    assert {c.ref: c.kind for c in candidates} == {
        "e3": Kind.TEXT_FIELD,
        "e4": Kind.SECURE_TEXT_FIELD,
        "e5": Kind.BUTTON,
        "e6": Kind.LINK,
        "e7": Kind.CHECKBOX,
        "e8": Kind.TAB,
    }
    assert context == ("Welcome back",)
    email = next(c for c in candidates if c.ref == "e3")
    assert email.name == "email input"  # from the resource id when there is no label


def test_agent_device_linux_shapes_keep_the_secure_bit_from_the_role() -> None:
    assert kinds(LINUX) == {
        "e3": Kind.TEXT_FIELD,
        "e4": Kind.SECURE_TEXT_FIELD,
        "e5": Kind.BUTTON,
        "e6": Kind.LINK,
    }


def test_secure_values_are_never_candidate_values() -> None:
    candidates, _ = project(IOS)
    assert next(c for c in candidates if c.ref == "e3").value == ""


@pytest.mark.parametrize(
    ("node", "kind"),
    [
        (Node(ref="e1", type="XCUIElementTypeSearchField"), Kind.TEXT_FIELD),
        (Node(ref="e1", type="XCUIElementTypeTextView"), Kind.TEXT_FIELD),
        (Node(ref="e1", type="android.widget.Switch"), Kind.SWITCH),
        (Node(ref="e1", type="androidx.appcompat.widget.SwitchCompat"), Kind.SWITCH),
        (Node(ref="e1", type="android.widget.RadioButton"), Kind.CHECKBOX),
        (Node(ref="e1", type="text-field"), Kind.TEXT_FIELD),
        (Node(ref="e1", type="secure-text-field"), Kind.SECURE_TEXT_FIELD),
        (Node(ref="e1", type="", role="push button"), Kind.BUTTON),
        (Node(ref="e1", type="SomethingNew"), Kind.OTHER),
    ],
)
def test_kind_table(node: Node, kind: Kind) -> None:
    assert kind_of(node) == kind


def test_context_texts_are_capped() -> None:
    nodes = [Node(ref=f"e{i}", type="XCUIElementTypeStaticText", label=f"t{i}") for i in range(30)]
    _, context = project(nodes)
    assert len(context) == MAX_CONTEXT_TEXTS


def test_snapshot_names_the_screen_and_fingerprints_structure() -> None:
    a = build_snapshot(IOS, "652468")
    b = build_snapshot([n.model_copy(update={"value": "x"}) for n in IOS], "652469")
    assert a.screen == "Sign in to Acme"
    assert a.fingerprint == b.fingerprint
    assert a.pin("e5") == "@e5~s652468"
    assert a.shows("sign in to acme")
