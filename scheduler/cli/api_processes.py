"""`goalfleet api --processes N`: the parent that keeps N forked API processes serving one
socket, and replaces any that dies.

Why our own and not uvicorn's (`uvicorn.supervisors.Multiprocess`, which restarts too since
0.30): it starts its children with `spawn`, so each re-imports everything and needs a
picklable app (an import string and a settings object read again from the environment);
forking after the socket is bound keeps `goalfleet api`'s one start line (naming the port
bound, `--port 0`) and its settings read once, and a replacement forked from a parent that
has the server's modules loaded serves within a fraction of a second.

- SIGTERM or SIGINT to the parent reaches every child (they shut down as uvicorn does), and
  the parent exits 0 when all have.
- A child that exits on its own (killed, crashed) is logged (`api_process_replaced`) and a new
  one forked in its place, while the others go on serving: the kernel hands new connections
  to whichever process accepts, so only the dead one's requests in flight are lost.
- A child that dies within `QUICK_EXIT_S` of its start `MAX_QUICK_EXITS` times in a row (a
  setting or a dependency that fails at every start) stops the API (exit 1,
  `api_processes_failing`) instead of forking forever; the waits between those restarts grow.
- Each child gets SIGTERM if the parent dies (`dies_with_this_process`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable

import structlog

from workers.processes import dies_with_this_process

log = structlog.stdlib.get_logger("goalfleet.api")

EXIT_OK = 0
QUICK_EXIT_S = 5.0
"""A child that exits sooner than this after its fork counts as failing at start."""
MAX_QUICK_EXITS = 5
"""That many quick exits in a row and the API stops (exit 1) rather than fork again."""
QUICK_EXIT_WAIT_S = 0.2
"""The wait before replacing a child after the k-th quick exit in a row: k times this."""

_STOPS = {signal.SIGTERM, signal.SIGINT}


def _child(serve_one: Callable[[], None], arm: Callable[[], None]) -> None:
    """In a forked child: serve until stopped, then leave without running the parent's
    cleanup (`os._exit`)."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
        arm()
        serve_one()
        code = EXIT_OK
    except KeyboardInterrupt:  # Ctrl-C: uvicorn shut down, then raised it again
        code = EXIT_OK
    except BaseException:
        log.exception("api_process_failed")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class Supervisor:
    """The parent's state: its children (pid -> fork time) and whether it is stopping."""

    def __init__(self, n: int, serve_one: Callable[[], None]) -> None:
        self.n = n
        self.serve_one = serve_one
        self.arm = dies_with_this_process()
        self.children: dict[int, float] = {}
        self.stopping = False
        self.quick_exits = 0

    def stop_all(self, _signum: int = signal.SIGTERM, _frame: object = None) -> None:
        self.stopping = True
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def fork(self) -> int:
        """One more child; the stop signals are held meanwhile, so a stop that comes during
        the fork reaches the new child too."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            pid = os.fork()
            if pid == 0:
                _child(self.serve_one, self.arm)
            self.children[pid] = time.monotonic()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)  # a held stop runs now
        return pid

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.stop_all)
        signal.signal(signal.SIGINT, self.stop_all)
        for _ in range(self.n):
            if self.stopping:  # a stop came while the first ones were forked
                break
            self.fork()
        code = EXIT_OK
        while self.children:
            pid, status = os.wait()
            started = self.children.pop(pid, None)
            if self.stopping or started is None:
                continue
            if not self.replace(pid, os.waitstatus_to_exitcode(status), started):
                code = 1
        return code

    def replace(self, pid: int, code: int, started: float) -> bool:
        """Fork a child in place of `pid`, which exited with `code`; False (and every child
        stopped) when children keep dying as soon as they start."""
        lived = time.monotonic() - started
        self.quick_exits = self.quick_exits + 1 if lived < QUICK_EXIT_S else 0
        if self.quick_exits >= MAX_QUICK_EXITS:
            log.error(
                "api_processes_failing",
                pid=pid,
                code=code,
                quick_exits=self.quick_exits,
                hint=f"{self.quick_exits} API processes in a row died within {QUICK_EXIT_S:g} s "
                "of their start; the API stops: see the errors above, fix them, start it again",
            )
            self.stop_all()
            return False
        time.sleep(QUICK_EXIT_WAIT_S * self.quick_exits)
        if self.stopping:  # a stop came during the wait
            return True
        new = self.fork()
        log.warning(
            "api_process_replaced",
            pid=pid,
            code=code,
            lived_s=round(lived, 1),
            new_pid=new,
            hint="an API process exited on its own; a new one serves in its place",
        )
        return True


def supervise(n: int, serve_one: Callable[[], None]) -> int:
    """Fork `n` processes that each run `serve_one` (the socket is inherited: the kernel hands
    each new connection to one of them), replace any that exits on its own, and return once a
    stop signal has stopped them all (0), or when they keep failing at start (1)."""
    return Supervisor(n, serve_one).run()
