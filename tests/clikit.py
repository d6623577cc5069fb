"""`goalfleet` as a person runs it, in a fresh process, for the tests that need the real
command line (imported by name, as `clikit`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any


def goalfleet_json(
    *argv: str, env: Mapping[str, str] | None = None, timeout_s: float = 240
) -> tuple[Any, subprocess.CompletedProcess[str]]:
    """`python -m scheduler <argv> --json` with `env` (default: this process's): asserts it
    exits 0 (the end of its stderr in the message) and returns its JSON output, and the
    process (its stdout and stderr)."""
    proc = goalfleet(*argv, "--json", env=env, timeout_s=timeout_s)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), proc


def goalfleet(
    *argv: str, env: Mapping[str, str] | None = None, timeout_s: float = 240
) -> subprocess.CompletedProcess[str]:
    """`python -m scheduler <argv>` with `env` (default: this process's), whatever it exits
    with: the process, its stdout and its stderr."""
    return subprocess.run(
        [sys.executable, "-m", "scheduler", *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ if env is None else env),
        timeout=timeout_s,
        check=False,
    )
