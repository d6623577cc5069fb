"""The process supervisor (`workers.processes`) against real processes: a stop reaches the
whole group, a pause freezes it, a child dies with its parent, and `pid_alive` tells the
living from the dead and the zombies."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from workers.processes import Child, pid_alive, spawn, stop_all

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


def _until(check: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _state(pid: int) -> str:
    """The kernel's state letter for `pid` (R, S, T for stopped, Z for zombie)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def _with_grandchild(tmp_path: Path, script: str) -> tuple[Child, int]:
    """`sh -c script`, where the script starts a grandchild and writes its pid to `$1`."""
    pid_file = tmp_path / "grandchild.pid"
    child = spawn(["/bin/sh", "-c", script, "sh", str(pid_file)], env=ENV, log=tmp_path / "c.log")
    assert _until(lambda: pid_file.exists() and pid_file.read_text().strip().isdigit())
    return child, int(pid_file.read_text())


def test_stop_ends_a_grandchild_that_ignores_sigterm(tmp_path: Path) -> None:
    """The leader exits on SIGTERM at once; a grandchild that ignores SIGTERM is still in the
    group and gets the group's SIGKILL."""
    child, grandchild = _with_grandchild(
        tmp_path, '(trap "" TERM; exec sleep 300) & echo $! > "$1"; wait'
    )
    assert pid_alive(grandchild)
    t0 = time.monotonic()
    child.stop(grace_s=5)
    assert time.monotonic() - t0 < 3, "the leader went on SIGTERM, no need to wait out the grace"
    assert child.returncode == -signal.SIGTERM
    assert _until(lambda: not pid_alive(grandchild))


def test_stop_kills_a_group_that_ignores_sigterm_after_the_grace(tmp_path: Path) -> None:
    """Leader and grandchild both ignore SIGTERM: after the grace period both are SIGKILLed."""
    child, grandchild = _with_grandchild(tmp_path, 'trap "" TERM; sleep 300 & echo $! > "$1"; wait')
    t0 = time.monotonic()
    child.stop(grace_s=0.5)
    assert 0.4 < time.monotonic() - t0 < 5
    assert child.returncode == -signal.SIGKILL
    assert _until(lambda: not pid_alive(grandchild))


def test_pause_freezes_the_group_and_resume_lets_it_run(tmp_path: Path) -> None:
    """SIGSTOP reaches the leader and the grandchild (state T, no progress); SIGCONT undoes it;
    a paused group still stops on SIGTERM."""
    ticks = tmp_path / "ticks"
    child, grandchild = _with_grandchild(
        tmp_path,
        f'sleep 300 & echo $! > "$1"; while :; do echo x >> {ticks}; sleep 0.02; done',
    )
    assert _until(lambda: ticks.exists() and len(ticks.read_text()) > 4)
    child.pause()
    assert _until(lambda: _state(child.pid) == "T" and _state(grandchild) == "T")
    frozen = ticks.read_text()
    time.sleep(0.3)
    assert ticks.read_text() == frozen
    child.resume()
    assert _until(lambda: _state(child.pid) != "T" and _state(grandchild) != "T")
    assert _until(lambda: len(ticks.read_text()) > len(frozen))
    child.pause()
    t0 = time.monotonic()
    stop_all([child], grace_s=5)
    assert time.monotonic() - t0 < 3
    assert child.returncode == -signal.SIGTERM
    assert _until(lambda: not pid_alive(grandchild))


def test_a_child_dies_with_its_parent(tmp_path: Path) -> None:
    """A process that spawned a child (in the child's own group) is SIGKILLed: the kernel sends
    the orphan SIGTERM (PR_SET_PDEATHSIG), which a group stop could not have reached."""
    code = (
        "import sys, time; from pathlib import Path; from workers.processes import spawn; "
        f"c = spawn(['sleep', '300'], env={ENV!r}, log=Path(sys.argv[1])); "
        "print(c.pid, flush=True); time.sleep(300)"
    )
    parent = spawn(
        [sys.executable, "-c", code, str(tmp_path / "gc.log")],
        env=ENV,
        log=tmp_path / "parent.log",
        pipe_stdout=True,
    )
    assert parent.proc.stdout is not None
    orphan = int(parent.proc.stdout.readline())
    assert pid_alive(orphan)
    parent.signal(signal.SIGKILL, leader_only=True)
    parent.wait(timeout=5)
    assert _until(lambda: not pid_alive(orphan)), parent.tail()
    stop_all([parent], grace_s=1)


def test_a_child_spawned_from_another_thread_outlives_that_thread(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG fires when the spawning *thread* ends: a child spawned from a thread
    that has since finished is still running (and still stops with its group)."""
    spawned: list[Child] = []
    t = threading.Thread(
        target=lambda: spawned.append(spawn(["sleep", "300"], env=ENV, log=tmp_path / "s.log"))
    )
    t.start()
    t.join()
    (child,) = spawned
    time.sleep(0.3)
    assert child.alive()
    child.stop(grace_s=5)
    assert child.returncode == -signal.SIGTERM


def test_output_goes_to_the_log_or_a_pipe(tmp_path: Path) -> None:
    """stdout and stderr are appended to the log; with `pipe_stdout` stdout is the caller's to
    read and stderr still goes to the log."""
    log = tmp_path / "out.log"
    log.write_text("earlier\n")
    child = spawn(["/bin/sh", "-c", "echo out; echo err >&2"], env=ENV, log=log, name="echo")
    assert child.wait(timeout=5) == 0
    assert child.name == "echo"
    assert log.read_text().splitlines() == ["earlier", "out", "err"]
    piped = spawn(["/bin/sh", "-c", "echo out; echo err >&2"], env=ENV, log=log, pipe_stdout=True)
    assert piped.proc.stdout is not None
    assert piped.proc.stdout.read() == b"out\n"
    assert piped.wait(timeout=5) == 0
    assert piped.name == "sh"
    assert log.read_text().splitlines() == ["earlier", "out", "err", "err"]
    stop_all([child, piped], grace_s=1)


def test_pid_alive(tmp_path: Path) -> None:
    """Alive: this process, and pid 1 (someone else's). Dead: a reaped child, a zombie, and
    the group ids 0 and -1."""
    assert pid_alive(os.getpid())
    assert pid_alive(1)
    assert not pid_alive(0)
    assert not pid_alive(-1)
    child = spawn(["/bin/true"], env=ENV, log=tmp_path / "t.log")
    assert _until(lambda: _state(child.pid) == "Z")  # exited, not reaped: no poll() until now
    assert not pid_alive(child.pid)
    child.wait(timeout=5)
    assert not pid_alive(child.pid)


@pytest.mark.parametrize("missing", ["/nonexistent/goalfleet-no-such-binary"])
def test_a_missing_program_raises(tmp_path: Path, missing: str) -> None:
    """No such program: FileNotFoundError, for the caller to translate (`ToolMissingError`)."""
    with pytest.raises(FileNotFoundError):
        spawn([missing], env=ENV, log=tmp_path / "x.log")
