"""Starting and stopping the process groups goalfleet runs (workers, daemons, test fleets).

Each child is started with `start_new_session=True`, so its pid is its process group id and
one `killpg` reaches everything it spawned (a Celery pool child, a D-Bus daemon).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


def spawn_logged(
    argv: Sequence[str], env: Mapping[str, str], log: Path, *, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start `argv` in a new process group (so `stop_groups` reaches its children), its
    stdout and stderr appended to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(  # noqa: S603 - argv from our own callers, no shell
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_groups(
    procs: Iterable[subprocess.Popen[bytes]], *, sig: int = signal.SIGTERM, grace_s: float = 10.0
) -> None:
    """Send `sig` to every group first (their shutdowns overlap), wait up to `grace_s` for
    each leader, SIGKILL the ones still there, and finally SIGKILL each group: a child may
    outlive its leader for a moment (a pool child, an a11y bus daemon)."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
    for proc in procs:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
