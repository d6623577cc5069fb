"""How a sim device is opened: its latencies, its fault injection, its session log. The
simulator's own business: real devices take none of it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Latencies:
    """Per-command latencies in milliseconds (agent-device on a real device, roughly)."""

    snapshot_ms: float = 100.0
    press_ms: float = 650.0
    """press + settle (quiet window 500 ms)."""
    fill_ms: float = 750.0
    network_ms: float = 1200.0
    """Extra time a slow (network-backed) transition takes."""
    jitter: float = 0.15
    """± fraction, drawn from the device's seeded RNG."""
    settle_ms: float = 500.0
    """The settle window inside `press_ms` and `fill_ms`: a remembered action skips it
    (`DevicePort.expect_known_screen`)."""

    def scaled(self, factor: float) -> Latencies:
        return Latencies(
            snapshot_ms=self.snapshot_ms * factor,
            press_ms=self.press_ms * factor,
            fill_ms=self.fill_ms * factor,
            network_ms=self.network_ms * factor,
            jitter=self.jitter,
            settle_ms=self.settle_ms * factor,
        )


ZERO_LATENCY = Latencies(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Faults:
    """Deterministic fault injection, keyed on the device's command counter (1-based).

    Each command (snapshot, press, fill) increments the counter before it runs.
    """

    stale_on: frozenset[int] = frozenset()
    """Mutations on these commands fail with `ref_frame_expired`."""
    transient_on: frozenset[int] = frozenset()
    """These commands fail with DEVICE_IN_USE (retriable)."""
    disconnect_after: int | None = None
    """Every command after this many fails with DEVICE_NOT_FOUND (the device went away)."""
    empty_snapshot_on: frozenset[int] = frozenset()
    stale_rate: float = 0.0
    transient_rate: float = 0.0
    """Random fault rates, drawn from the device's seeded RNG."""


NO_FAULTS = Faults()


@dataclass(frozen=True)
class SimOptions:
    """How a sim device is opened: everything here is the simulator's own business (real
    devices take none of it)."""

    latency_scale: float = 0.0
    """0: instant; 1.0: realistic snapshot/press/fill/network latencies."""
    session_log: Path | None = None
    """If set, `open`/`close` lines (pid, monotonic ns) are appended, and each command's
    interval to `sim.action_log(session_log)` beside it: overlap checks."""
    faults: Faults = NO_FAULTS
    """Deterministic fault injection (chaos and quarantine tests)."""


DEFAULT_SIM = SimOptions()
