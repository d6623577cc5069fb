"""The program (`console_main`: the console script, `python -m scheduler`) freezes what the
garbage collector tracks before it exits, so the exit does not walk it, and its exit is
still an exit: the atexit handlers run and what it printed is flushed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # the whole command as a process: make test, not make unit

PROGRAM = """
import atexit, gc, sys
atexit.register(lambda: print(f"frozen at exit: {gc.get_freeze_count()}", file=sys.stderr))
sys.argv = ["goalfleet", *sys.argv[1:]]
from scheduler.cli.main import console_main
sys.exit(console_main())
"""


def test_the_program_exits_with_the_collector_frozen_and_its_output_flushed() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOALFLEET_")}
    env |= {"GOALFLEET_API_URL": "http://127.0.0.1:9", "GOALFLEET_API_WAIT_S": "0"}
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, "status", "0123456789abcdef"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 3  # the API is unavailable
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("goalfleet status: cannot reach the goalfleet API"), lines
    frozen = int(lines[-1].removeprefix("frozen at exit: "))
    assert frozen > 10_000  # pydantic's schemas, the modules: what the imports made
