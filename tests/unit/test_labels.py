"""Fields labelled by their neighbours (issue 42, item 1): a text field with no accessible
name takes the label a person reads beside it — by the platform's relation, else by
geometry (left on its row, above in its column, in its container), else by reading order —
and every decider is told the name is inferred."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workers.core.model import DecideState, Node
from workers.core.projection import build_snapshot
from workers.decide.prompt import render_user
from workers.devices.agent_device.replies import read_node
from workers.devices.sim.device import make_sim_device

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent_device"


def _entry(ref: str, rect: tuple[int, int, int, int] | None = None, **kw: object) -> Node:
    return Node(ref=ref, type="TextField", role="text", rect=rect, **kw)  # type: ignore[arg-type]


def _label(
    ref: str, text: str, rect: tuple[int, int, int, int] | None = None, **kw: object
) -> Node:
    return Node(ref=ref, type="StaticText", role="label", label=text, rect=rect, **kw)  # type: ignore[arg-type]


def _names(nodes: list[Node]) -> dict[str, tuple[str, bool]]:
    snap = build_snapshot(nodes, "1")
    return {c.ref: (c.name, c.inferred) for c in snap.candidates}


def test_a_grid_listed_last_first_is_read_by_geometry() -> None:
    """GTK 3 lists a grid's children last added first: [entry 2, label 2, entry 1, label 1].
    By reading order entry 1 would take "Password"; by geometry each entry takes the label on
    its left."""
    nodes = [
        _entry("e1", (120, 60, 200, 30), container="7"),
        _label("e2", "Password", (10, 64, 90, 22), container="7"),
        _entry("e3", (120, 20, 200, 30), container="7"),
        _label("e4", "E-mail", (10, 24, 90, 22), container="7"),
    ]
    assert _names(nodes) == {"e1": ("Password", True), "e3": ("E-mail", True)}


def test_a_label_above_its_field_in_the_same_column() -> None:
    nodes = [
        _label("e1", "Username", (20, 10, 80, 20)),
        _entry("e2", (20, 34, 240, 30)),
        _label("e3", "Password", (20, 74, 80, 20)),
        _entry("e4", (20, 98, 240, 30)),
    ]
    assert _names(nodes) == {"e2": ("Username", True), "e4": ("Password", True)}


def test_a_label_in_another_container_does_not_name_a_field() -> None:
    """The text to the left sits in another container (a sidebar): no name is made up."""
    nodes = [
        _label("e1", "Search", (10, 20, 90, 22), container="3"),
        _entry("e2", (120, 20, 200, 30), container="9"),
    ]
    assert _names(nodes) == {"e2": ("", False)}


def test_the_relation_wins_over_geometry() -> None:
    nodes = [
        _label("e1", "Nickname", (10, 20, 90, 22)),
        _entry("e2", (120, 20, 200, 30), labelled_by="e3"),
        _label("e3", "Login", (500, 500, 60, 20)),
    ]
    assert _names(nodes) == {"e2": ("Login", True)}


def test_reading_order_stops_at_a_control() -> None:
    """Without bounds: the text just before the field names it, unless a control stands
    between them (then the text is that control's neighbour, not the field's)."""
    nodes = [
        _label("e1", "E-mail"),
        _entry("e2"),
        _label("e3", "Remember me"),
        Node(ref="e4", type="Switch", label=""),
        _entry("e5"),
    ]
    assert _names(nodes) == {"e2": ("E-mail", True), "e4": ("", False), "e5": ("", False)}


def test_a_field_with_a_name_keeps_it() -> None:
    nodes = [_label("e1", "Password"), _entry("e2", label="Email")]
    assert _names(nodes) == {"e2": ("Email", False)}


def test_every_decider_is_told_the_name_is_inferred() -> None:
    """The sim form whose entries have no name: the candidates carry the labels beside them,
    marked inferred, and the model's prompt says so."""
    snap = make_sim_device("sim:unnamed-android").snapshot()
    fields = [(c.name, c.inferred) for c in snap.candidates if c.kind.fillable]
    assert fields == [("E-mail", True), ("Password", True)]
    state = DecideState(
        goal="Sign in",
        step=1,
        candidates=snap.candidates,
        context=snap.context,
        input_names=("email",),
    )
    assert "e3 field E-mail (label beside it)" in render_user(state).splitlines()


@pytest.mark.parametrize(
    ("fixture", "entries"),
    [
        # [password entry, "Password", e-mail entry, "E-mail"] in one panel
        ("snapshot_zenity_forms", {"e4": "Password", "e6": "E-mail"}),
        # ["Username:", "Password:", username entry, password entry]
        ("snapshot_zenity_password", {"e7": "Username:", "e8": "Password:"}),
        # [password entry, "Password", username entry, "Username"]
        ("snapshot_yad_form", {"e4": "Password", "e6": "Username"}),
    ],
)
def test_real_dialogs_as_agent_device_reports_them(fixture: str, entries: dict[str, str]) -> None:
    """Debian's dialog tools through the real daemon (recorded from the dialogs of
    tests/agent_device/test_third_party_e2e.py): AT-SPI lists labels and entries in an order
    that pairs them wrongly by reading order; with bounds, each entry takes the label on its
    left."""
    raw = json.loads((FIXTURES / f"{fixture}.json").read_text())["data"]["nodes"]
    nodes = [n for n in (read_node(r, lambda s: s) for r in raw) if n]
    fields = {c.ref: (c.name, c.inferred) for c in build_snapshot(nodes, "1").candidates}
    assert {ref: fields[ref] for ref in entries} == {r: (n, True) for r, n in entries.items()}
