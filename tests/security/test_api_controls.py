"""Control characters (in-process ASGI, real Redis): a goal, a selector's labels and
os_version, and a schedule's name holding a C0/C1 control or a bidi override are refused with
a one-line 422 naming the field, and nothing is written; an input's value, which may need such
a character, is kept as given and shown escaped (`workers.core.text.visible`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import DEVICE, TOKEN, Api
from fastapi.testclient import TestClient

from workers.core.text import CONTROL, plain, visible

AUTH = {"Authorization": f"Bearer {TOKEN}"}
NASTY = {"NUL": "\x00", "BEL": "\x07", "ESC": "\x1b[31m", "C1": "\x9b", "RLO": "\u202e"}


@pytest.fixture
def client(api: Api) -> Iterator[TestClient]:
    with TestClient(api.app) as c:
        yield c


def _bodies(bad: str) -> dict[str, tuple[str, dict[str, Any], str, str]]:
    """path, body, the field the 422 names, the words its problem starts with."""
    return {
        "goal": ("/v1/runs", {"goal": f"Sign{bad} in", "device": DEVICE}, "goal", "holds"),
        "label": (
            "/v1/runs",
            {"goal": "Sign in", "selector": {"labels": {"pool": f"a{bad}"}}},
            "selector",
            "labels.pool holds",
        ),
        "os_version": (
            "/v1/batches",
            {"goal": "Sign in", "selector": {"os_version": f"17{bad}"}},
            "selector",
            "os_version holds",
        ),
        "batch goal": ("/v1/batches", {"goal": f"{bad}Sign in", "count": 1}, "goal", "holds"),
        "schedule name": (
            "/v1/schedules",
            {"goal": "Sign in", "name": f"nightly{bad}", "every_s": 60},
            "name",
            "holds",
        ),
        "input name": (
            "/v1/runs",
            {"goal": "Sign in", "device": DEVICE, "inputs": {f"email{bad}": "x"}},
            "inputs",
            "input name",
        ),
    }


@pytest.mark.parametrize("char", NASTY)
@pytest.mark.parametrize("where", list(_bodies("")))
def test_controls_are_refused_naming_the_field(
    api: Api, client: TestClient, where: str, char: str
) -> None:
    """Each character in each place: a 422 naming the field, one line, nothing written."""
    path, body, field, starts = _bodies(NASTY[char])[where]
    before = api.footprint()
    resp = client.post(path, json=body, headers=AUTH)
    assert resp.status_code == 422, resp.text
    problem = resp.json()["problems"][0]
    assert problem["field"] == field, problem
    assert problem["problem"].startswith(starts), problem
    assert CONTROL.search(resp.json()["message"]) is None, resp.json()["message"]  # one line
    assert api.footprint() == before


def test_an_input_value_keeps_its_characters_and_is_shown_escaped(
    api: Api, client: TestClient
) -> None:
    """A value to type is stored as given; shown, every control is an escape."""
    value = "tab\there\u202eevil\x1b[2J"
    resp = client.post(
        "/v1/runs",
        json={"goal": "Sign in", "device": DEVICE, "inputs": {"note": value}},
        headers=AUTH,
    )
    assert resp.status_code == 201, resp.text
    got = client.get(f"/v1/runs/{resp.json()['id']}", headers=AUTH).json()
    assert got["request"]["inputs"]["note"] == value
    assert visible(value) == "tab\\there\\u202eevil\\x1b[2J"
    assert CONTROL.search(visible(value)) is None
    client.post(f"/v1/runs/{resp.json()['id']}/cancel", headers=AUTH)


def test_plain_text_passes() -> None:
    """Accents, dashes and other scripts are plain text: only controls and bidi marks are not."""
    assert plain("Sign in — naïve café, 日本語") == "Sign in — naïve café, 日本語"
