"""The sim device's action log: one JSON line per command, for the partition test's overlap
checks (who drove the device, for which run, from when to when)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from workers.core.errors import StaleRefError
from workers.core.model import InputValue
from workers.devices.sim.device import action_log, make_sim_device


def test_every_command_is_logged_with_its_interval_pid_and_seed(tmp_path: Path):
    """Snapshot, fill and press each write a line, a refused command too; the session log keeps
    its open/close lines only."""
    session = tmp_path / "d1.log"
    device = make_sim_device("sim:signin-ios", seed=4242, session_log=session)
    snap = device.snapshot()
    field = next(n for n in snap.nodes if n.type == "XCUIElementTypeTextField")
    email = InputValue(name="email", value=SecretStr("ada@example.com"))
    device.fill(f"@{field.ref}~s{snap.refs_generation}", email)
    with pytest.raises(StaleRefError):
        device.press("@e1~s1")  # a generation never issued
    device.close()

    lines = [json.loads(x) for x in action_log(session).read_text().splitlines()]
    assert [x["command"] for x in lines] == ["snapshot", "fill", "press"]
    assert {x["pid"] for x in lines} == {os.getpid()}
    assert {x["seed"] for x in lines} == {4242}
    for a, b in itertools.pairwise(lines):
        assert a["start_ns"] < a["end_ns"] <= b["start_ns"]
    assert [line.split()[0] for line in session.read_text().splitlines()] == ["open", "close"]


def test_no_session_log_no_action_log(tmp_path: Path):
    device = make_sim_device("sim:signin-ios")
    device.snapshot()
    assert list(tmp_path.iterdir()) == []
