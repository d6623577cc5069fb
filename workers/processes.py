"""Stopping the process groups goalfleet starts (workers, daemons, Xvfb stacks, test fleets).

Each child is started with `start_new_session=True`, so its pid is its process group id and
one `killpg` reaches everything it spawned (a Celery pool child, a D-Bus daemon).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable


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
