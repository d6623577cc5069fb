"""The sim devices' action logs read back (one JSON line per device command: pid, run seed,
monotonic start and end), and the overlap checks over them: a device driven by two workers at
once, a run driven on two devices at once. Every worker runs on this machine, so
`CLOCK_MONOTONIC` is one clock for all of them."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from workers.devices.sim.device import action_log


@dataclass(frozen=True)
class Action:
    worker: str
    """Which worker process drove the device (the test's name for it: host and device)."""
    device: str
    seed: int
    """The run's seed (`zlib.crc32(run_id)`): which run the command was for."""
    command: str
    start_ns: int
    end_ns: int


def read_actions(session_log: Path, *, worker: str, device: str) -> list[Action]:
    path = action_log(session_log)
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        out.append(
            Action(worker, device, int(raw["seed"]), raw["command"], raw["start_ns"], raw["end_ns"])
        )
    return out


def run_seed(run_id: str) -> int:
    """The seed a worker opens a run's sim device with (`runtime.default_device_opener`)."""
    return zlib.crc32(run_id.encode())


@dataclass(frozen=True)
class Span:
    start_ns: int
    end_ns: int
    owner: str
    label: str


def overlapping(spans: Iterable[Span]) -> list[str]:
    """Pairs of spans of different owners that overlap in time."""
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    bad = []
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b.start_ns >= a.end_ns:
                break
            if b.owner != a.owner:
                bad.append(
                    f"{a.label} by {a.owner} [{a.start_ns}, {a.end_ns}] overlaps "
                    f"{b.label} by {b.owner} [{b.start_ns}, {b.end_ns}]"
                )
    return bad


def run_spans(actions: Iterable[Action]) -> dict[tuple[str, str, int], Span]:
    """One span per (worker, device, run seed): its first command's start to its last
    command's end, the time that worker was driving that run (an attempt it abandoned ends
    at its last command)."""
    bounds: dict[tuple[str, str, int], tuple[int, int]] = {}
    for a in actions:
        key = (a.worker, a.device, a.seed)
        s, e = bounds.get(key, (a.start_ns, a.end_ns))
        bounds[key] = (min(s, a.start_ns), max(e, a.end_ns))
    return {
        (w, d, seed): Span(s, e, w, f"run seed {seed} on {d}")
        for (w, d, seed), (s, e) in bounds.items()
    }


def device_overlaps(actions: list[Action]) -> list[str]:
    """Two workers driving one device at once: their commands overlap, or one ran a command
    while the other was in the middle of a run on it."""
    bad = []
    for device in sorted({a.device for a in actions}):
        mine = [a for a in actions if a.device == device]
        bad += overlapping(Span(a.start_ns, a.end_ns, a.worker, a.command) for a in mine)
        bad += overlapping(run_spans(mine).values())
    return bad


def run_overlaps(actions: list[Action]) -> list[str]:
    """One run driven by two workers at once (on one device or on two)."""
    spans = run_spans(actions)
    bad = []
    for seed in sorted({seed for _, _, seed in spans}):
        bad += overlapping(span for (_, _, s), span in spans.items() if s == seed)
    return bad
