"""Child processes that die with their parent (Linux `PR_SET_PDEATHSIG`), so a demo or test
process that is killed or crashes leaves no worker or redis-server behind."""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """`preexec_fn` for `subprocess.Popen`: SIGTERM this child when its parent dies."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
