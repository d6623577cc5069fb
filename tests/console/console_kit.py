"""The console tests' constants (imported by name: `conftest` is ambiguous across test dirs)."""

from __future__ import annotations

ALICE = ("alice", "alice-console-token-7f3a")
"""Submits and answers (and reads, to watch her runs on the fleet page)."""
VIEWER = ("viewer", "viewer-console-token-91c2")
"""Reads everything, changes nothing."""
ROLES = f"{ALICE[0]}:submit+answer+read,{VIEWER[0]}:read"
PASSWORD = "zq7-Hx4-5521"
RUN = {
    "goal": "Sign in",
    "inputs": {"email": "ada@example.com"},
    "secrets": {"password": {"ref": "env:CONSOLE_PW"}},
    "done_when": "Welcome",
}
HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> {{7*7}}'
"""A goal a submitter typed: the pages must show it as text."""
CHROMIUM = "/usr/bin/chromium"
