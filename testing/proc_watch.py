"""A watcher process that scans every process's `/proc/PID/cmdline` and `/proc/PID/environ`
for given values, every few milliseconds, for as long as it is told to: what any other local
process (any user, for the command line) could have read at that moment.

`ProcWatcher` runs it as a separate process (the way an attacker on the host would, and free of
the test process's GIL): the values go to it over its stdin, never its argv or environment, and it
never scans itself. Its report says what it saw where (pid, file, command name; never the value
itself), how often it scanned, the longest gap between two scans, and how many processes it saw
whose command line held each of the `probes` (e.g. `b"xdotool\\0type"`: proof that it sampled
the typing process while it lived, so it would have caught a value on its command line).

    with ProcWatcher([secret], probes=[b"xdotool\\0type"]) as watch:
        ...
    assert watch.report.hits == []
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

__all__ = ["Hit", "ProcWatcher", "WatchReport"]

_FILES = ("cmdline", "environ")


@dataclass(frozen=True)
class Hit:
    pid: int
    file: str
    """`cmdline` or `environ`."""
    needle: int
    """Which of the watched values (its index)."""
    comm: str
    """The process's command name (`/proc/PID/comm`)."""


@dataclass(frozen=True)
class WatchReport:
    scans: int
    elapsed_s: float
    max_gap_ms: float
    """The longest time between the starts of two scans."""
    mean_scan_ms: float
    processes: int
    """Distinct pids seen."""
    hits: list[Hit]
    sightings: list[int]
    """Per probe: how many distinct processes had it in their command line."""

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> WatchReport:
        return cls(
            scans=int(raw["scans"]),
            elapsed_s=float(raw["elapsed_s"]),
            max_gap_ms=float(raw["max_gap_ms"]),
            mean_scan_ms=float(raw["mean_scan_ms"]),
            processes=int(raw["processes"]),
            hits=[Hit(**h) for h in raw["hits"]],
            sightings=[int(n) for n in raw["sightings"]],
        )


class ProcWatcher:
    """Start the watcher on `__enter__` (returns once it has scanned once), stop it and read its
    report on `__exit__` (`.report`)."""

    def __init__(
        self,
        values: Sequence[str | bytes],
        *,
        probes: Sequence[bytes] = (),
        interval_ms: float = 2.0,
        python: str = sys.executable,
    ) -> None:
        self._needles = [v.encode() if isinstance(v, str) else v for v in values]
        if not self._needles or not all(self._needles):
            raise ValueError("watch for at least one non-empty value")
        self._probes = list(probes)
        self._interval_ms = interval_ms
        self._python = python
        self._proc: subprocess.Popen[bytes] | None = None
        self._report: WatchReport | None = None

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("the watcher is not running")
        return self._proc.pid

    @property
    def report(self) -> WatchReport:
        if self._report is None:
            raise RuntimeError("the watcher has not been stopped yet")
        return self._report

    def start(self) -> None:
        argv = [self._python, "-I", str(Path(__file__).resolve()), str(self._interval_ms)]
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and file
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        self._proc = proc
        assert proc.stdin is not None  # noqa: S101 - set by PIPE
        assert proc.stdout is not None  # noqa: S101 - set by PIPE
        lines = [b"N " + n.hex().encode() for n in self._needles]
        lines += [b"P " + p.hex().encode() for p in self._probes]
        proc.stdin.write(b"\n".join([*lines, b"go"]) + b"\n")
        proc.stdin.flush()
        ready = proc.stdout.readline()
        if ready.strip() != b"ready":
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the watcher did not start: {ready!r}")

    def stop(self) -> WatchReport:
        proc = self._proc
        if proc is None:
            raise RuntimeError("the watcher is not running")
        out, _ = proc.communicate(b"stop\n", timeout=30)
        self._proc = None
        self._report = WatchReport.from_json(json.loads(out))
        return self._report

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._proc is not None:
            self.stop()


# -- the watcher process ----------------------------------------------------------------------


def _read(path: str) -> bytes | None:
    """The whole file, or None if it is gone, empty or not ours to read (a bare `os.read`
    loop: this is the hot path, half the cost of `open().read()`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


class _Scanner:
    """The watcher process's state: what it has found so far."""

    def __init__(self, needles: list[bytes], probes: list[bytes]) -> None:
        self.me = str(os.getpid())
        self.needles = needles
        self.probes = probes
        self.hits: dict[tuple[int, str, int], Hit] = {}
        self.sighted: list[set[int]] = [set() for _ in probes]
        self.seen: set[int] = set()

    def scan(self) -> None:
        for name in os.listdir("/proc"):  # noqa: PTH208 - the hot loop: names, not Paths
            if not name.isdigit() or name == self.me:
                continue
            pid = int(name)
            self.seen.add(pid)
            for file in _FILES:
                data = _read(f"/proc/{name}/{file}")
                if data:
                    self._look(pid, file, data)

    def _look(self, pid: int, file: str, data: bytes) -> None:
        for i, needle in enumerate(self.needles):
            if needle in data and (pid, file, i) not in self.hits:
                comm = (_read(f"/proc/{pid}/comm") or b"?").decode(errors="replace").strip()
                self.hits[(pid, file, i)] = Hit(pid=pid, file=file, needle=i, comm=comm)
        if file == "cmdline":
            for i, probe in enumerate(self.probes):
                if probe in data:
                    self.sighted[i].add(pid)


def _watch(needles: list[bytes], probes: list[bytes], interval_s: float) -> dict[str, Any]:
    """Scan until a line (or the end of file) arrives on stdin; "ready" on stdout after the
    first scan."""
    scanner = _Scanner(needles, probes)
    scans = 0
    max_gap = 0.0
    scan_total = 0.0
    first = last = time.monotonic()
    scanner.scan()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        started = time.monotonic()
        max_gap = max(max_gap, started - last)
        last = started
        scanner.scan()
        scans += 1
        scan_total += time.monotonic() - started
        ready, _, _ = select.select([sys.stdin.buffer], [], [], interval_s)
        if ready:
            break
    return {
        "scans": scans,
        "elapsed_s": round(time.monotonic() - first, 3),
        "max_gap_ms": round(max_gap * 1000, 2),
        "mean_scan_ms": round(scan_total * 1000 / max(scans, 1), 3),
        "processes": len(scanner.seen),
        "hits": [h.__dict__ for h in scanner.hits.values()],
        "sightings": [len(s) for s in scanner.sighted],
    }


def main() -> None:
    interval_s = float(sys.argv[1]) / 1000
    needles: list[bytes] = []
    probes: list[bytes] = []
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if line == b"go":
            break
        kind, _, value = line.partition(b" ")
        (needles if kind == b"N" else probes).append(bytes.fromhex(value.decode()))
    report = _watch(needles, probes, interval_s)
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
