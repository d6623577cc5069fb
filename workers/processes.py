"""The one process supervisor: every process goalfleet starts (Redis, workers, the API and the
scheduler, the agent-device daemon, the Linux desktop stack, test and bench fleets) is a
`Child` from `spawn`, and is stopped through it.

- Each child leads its own session and process group (`start_new_session=True`): its pid is its
  group id, so one `killpg` reaches everything it spawned (a Celery pool child, a D-Bus daemon,
  a Node helper).
- Its stdout and stderr are appended to a log file; or its stdout is a pipe, when the caller
  must read what it prints (`pipe_stdout=True`). stdin is /dev/null.
- `stop` is SIGTERM to the group, a grace period for the leader, then SIGKILL to the group:
  whatever the leader left behind goes too.
- With `die_with_parent` (the default) the child gets SIGTERM when its parent dies (Linux
  `PR_SET_PDEATHSIG`), so a killed test or demo leaves nothing behind. The kernel's "parent" is
  the spawning *thread*, so this applies only to a child spawned from the main thread: one
  spawned from another thread (a chaos thread restarting a worker) would otherwise be
  signalled when that thread ends. `stop` still reaches it.
- `pause` and `resume` (SIGSTOP, SIGCONT to the group) freeze a child for chaos tests.
- `Stoppable` is the one context-manager protocol of whatever owns such children (a local
  Redis, a desktop, a daemon, a whole local fleet): `with` stops it on the way out.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from signal import SIGCONT, SIGKILL, SIGSTOP, SIGTERM
from typing import Self

__all__ = [
    "Child",
    "Stoppable",
    "dies_with_this_process",
    "pid_alive",
    "process_started",
    "spawn",
    "stop_all",
    "stop_group",
]

DEFAULT_GRACE_S = 10.0
_REAP_S = 5.0
"""How long to wait for a leader after SIGKILL (the kernel delivers it at once)."""


@dataclass(frozen=True)
class Child:
    """A process group started by `spawn`; `log` holds its output (its stderr when stdout is a
    pipe: read that from `proc.stdout`)."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        """The leader's pid, which is also the group's id."""
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        """The leader's exit status (negative: the signal that ended it), None while it runs."""
        return self.proc.poll()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        """The leader's exit status once it exits (`subprocess.TimeoutExpired` after `timeout`
        seconds, as `Popen.wait`). Its group may outlive it: `stop` ends that."""
        return self.proc.wait(timeout=timeout)

    def signal(self, sig: int, *, leader_only: bool = False) -> None:
        """Send `sig` to the whole group (also after the leader exited: what it left behind), or
        to the leader alone while it runs (`leader_only`, e.g. a Celery warm shutdown)."""
        if leader_only:
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM to the group, without waiting (`stop` waits, and makes sure)."""
        self.signal(SIGTERM)

    def pause(self) -> None:
        """Freeze the whole group (SIGSTOP): it holds its sockets and leases but does nothing."""
        self.signal(SIGSTOP)

    def resume(self) -> None:
        """Let a paused group run again (SIGCONT)."""
        self.signal(SIGCONT)

    def stop(self, grace_s: float = DEFAULT_GRACE_S, *, sig: int = SIGTERM) -> None:
        """`sig` to the group, up to `grace_s` for the leader to exit, then SIGKILL to the group."""
        stop_all([self], grace_s, sig=sig)

    def tail(self, chars: int = 3000) -> str:
        """The end of its log, for an error message."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


class Stoppable:
    """What one owner starts and stops. As a context manager, `with x as y` runs `start()` (by
    default nothing: `x` was made started) and `stop()` on the way out, also when `start()`
    fails half-way, so a subclass's `stop()` must cope with a half-started state (and with a
    second call)."""

    def start(self) -> Self:
        return self

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path,
    name: str = "",
    cwd: Path | None = None,
    die_with_parent: bool = True,
    pipe_stdout: bool = False,
) -> Child:
    """Start `argv` (no shell) in a new session and process group with exactly `env`, its
    output appended to `log` (stdout to a pipe instead with `pipe_stdout`). `name` defaults to
    the program's file name. A missing program raises `FileNotFoundError`."""
    preexec: Callable[[], None] | None = None
    if (
        die_with_parent
        and sys.platform.startswith("linux")
        and threading.current_thread() is threading.main_thread()
    ):
        preexec = dies_with_this_process()
    with log.open("ab") as out:
        proc = subprocess.Popen(  # noqa: S603 - argv from our own callers, no shell
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipe_stdout else out,
            stderr=out if pipe_stdout else subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,  # noqa: PLW1509 - only prctl and getppid, no locks taken
        )
    return Child(name or Path(argv[0]).name, proc, log)


def stop_all(
    children: Iterable[Child], grace_s: float = DEFAULT_GRACE_S, *, sig: int = SIGTERM
) -> None:
    """`sig` to every group first (their shutdowns overlap; SIGCONT too, so a paused group can
    act on it), up to `grace_s` in all for the leaders, SIGKILL to the group of each leader
    still there, and finally SIGKILL to every group: a child may outlive its leader for a
    moment (a pool child, an accessibility bus daemon)."""
    children = list(children)
    for child in children:
        child.signal(sig)
        child.signal(SIGCONT)
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.signal(SIGKILL)
            child.proc.wait(timeout=_REAP_S)
        child.signal(SIGKILL)
        if child.proc.stdout is not None:
            child.proc.stdout.close()


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists and has not exited: one of someone else's counts, a
    zombie (exited, not yet reaped by its parent) does not."""
    if pid <= 0:  # kill(0, 0) and kill(-1, 0) would ask about groups, not a process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not sys.platform.startswith("linux"):
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False  # it went between the two looks
    return stat.rpartition(")")[2].split()[0] != "Z"  # `pid (comm) state ...`


def process_started(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, `/proc/<pid>/stat` field 22), or None when it
    is gone or this is not Linux: with the pid, it names one process even after the pid is
    reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rpartition(")")[2].split()
    return int(fields[19]) if len(fields) > 19 else None  # noqa: PLR2004 - field 22 of stat


def stop_group(pid: int, grace_s: float = DEFAULT_GRACE_S) -> None:
    """Stop a process group this process did not `spawn` (a child a dead owner left behind):
    SIGTERM to the group `pid` leads (to `pid` alone when it leads none), up to `grace_s` for
    `pid` to exit, then SIGKILL. Only for a `pid` the caller has checked is the one it means."""
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return
    send = functools.partial(os.killpg, pid) if group == pid else functools.partial(os.kill, pid)
    for sig in (SIGTERM, SIGCONT):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            send(sig)
    deadline = time.monotonic() + grace_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        send(SIGKILL)  # what the leader left behind goes too


_PR_SET_PDEATHSIG = 1
_Prctl = Callable[[int, int, int, int, int], int]


@functools.cache
def _prctl() -> _Prctl:
    """libc's `prctl`, looked up in the parent: the child between fork and exec must not run
    `find_library` (it starts processes of its own)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fn: _Prctl = libc.prctl
    return fn


def dies_with_this_process() -> Callable[[], None]:
    """What a child runs first to get SIGTERM when this process (the caller, the parent to be)
    dies, also if it already did: `spawn`'s preexec, and a forked child's first act (`goalfleet
    api --processes`). Called in the parent: libc's `prctl` is looked up here, not in the child."""
    return functools.partial(_die_with, _prctl(), os.getpid())


def _die_with(prctl: _Prctl, parent: int) -> None:
    """In the child (before exec, or first thing after a fork): SIGTERM when the parent dies,
    also if it already did."""
    prctl(_PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), SIGTERM)
