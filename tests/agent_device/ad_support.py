"""Shared constants and helpers of the agent-device end-to-end tests (imported by name, since
`from conftest import ...` is ambiguous once several test dirs have a conftest)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

APP = Path(__file__).resolve().parents[1] / "apps" / "gtk_signin.py"
EMAIL = "alice@example.com"
PASSWORD = "e2e-" + uuid.uuid4().hex[:12] + "-Pw!"
"""Fresh per test session, so a leak scan cannot pass by luck."""


@dataclass
class App:
    state_file: Path

    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text(encoding="utf-8"))


def daemons_under(root: Path) -> list[int]:
    """Live agent-device daemons (and their helpers) whose state dir is under `root`, found by
    their environment in /proc: what a test must not leave behind."""
    found = []
    wanted = f"AGENT_DEVICE_STATE_DIR={root}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if state != "Z" and any(v.startswith(wanted) for v in env.split(b"\0")):
            found.append(int(proc.name))
    return found
