"""Starting and stopping the process groups goalfleet runs (workers, daemons, test fleets).

Each child is started with `start_new_session=True`, so its pid is its process group id and
one `killpg` reaches everything it spawned (a Celery pool child, a D-Bus daemon).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
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


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """`preexec_fn` for `subprocess.Popen`: SIGTERM this child when its parent dies (Linux
    `PR_SET_PDEATHSIG`), so a demo or test process that is killed leaves nothing behind."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
