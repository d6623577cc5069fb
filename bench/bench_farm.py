"""A kept daemon against a daemon per run, on the real Linux target (issue 25, item 2).

    .venv/bin/python bench/bench_farm.py [--pairs 5]

Starts a private desktop and the GTK sign-in app, then times, interleaved in pairs, what a run
spends on its device outside the loop, plus its first snapshot:

- per run (before): `open_device("agent-device:linux")`: claim the state dir, start a daemon,
  open the session; a snapshot; `close()`: close the session and stop the daemon;
- kept (after): `AgentDeviceHost.open`: health-check the kept daemon (its Linux session is
  kept too); a snapshot; `close()` ends the run only (daemon and session stay for the next).

Prints, for each, the median open → first snapshot (the first-snapshot latency of a run), the
median close and their sum, and the ratio after/before, from the same run.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import structlog

from bench._signin import start_signin
from testing.linux_desktop import start_linux_desktop
from workers.core.ports import DevicePort
from workers.devices.agent_device.host import AgentDeviceHost, open_device
from workers.stats import median

SPEC = "agent-device:linux"


def one(open_it: Callable[[], DevicePort]) -> tuple[float, float]:
    """(open → first snapshot ms, close ms) of one run's device."""
    t0 = time.perf_counter()
    dev = open_it()
    snap = dev.snapshot()
    first = (time.perf_counter() - t0) * 1000
    if not snap.shows("Sign in"):
        raise SystemExit(f"the app is not on its sign-in screen: {snap.candidates}")
    t1 = time.perf_counter()
    dev.close()
    return first, (time.perf_counter() - t1) * 1000


def bare_snapshots(host: AgentDeviceHost, n: int) -> list[float]:
    """The snapshot alone, on the warm session: what a first snapshot cannot go below."""
    dev = host.open("bare")
    try:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            dev.snapshot()
            out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        dev.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with (
        tempfile.TemporaryDirectory(prefix="gf-bench-farm-") as tmp,
        start_linux_desktop(Path(tmp) / "desk") as desk,
    ):
        start_signin(desk, Path(tmp))
        per_root, kept_root = Path(tmp) / "per-run", Path(tmp) / "kept"
        host = AgentDeviceHost(SPEC, env=desk.env, state_root=kept_root)
        try:
            one(lambda: host.open("warm-up"))  # the worker's first run starts the daemon
            before: list[tuple[float, float]] = []
            after: list[tuple[float, float]] = []
            for _ in range(args.pairs):
                before.append(one(lambda: open_device(SPEC, env=desk.env, state_root=per_root)))
                after.append(one(lambda: host.open("run")))
            bare = bare_snapshots(host, args.pairs)
        finally:
            host.close()
    rows = []
    for name, xs in (("daemon per run (before)", before), ("kept daemon (after)", after)):
        first, close = median([x[0] for x in xs]), median([x[1] for x in xs])
        total = median([x[0] + x[1] for x in xs])
        rows.append((name, first, close, total))
    print(f"GTK sign-in app on Xvfb, {args.pairs} interleaved pairs, medians\n")
    print("| device per run | open → first snapshot ms | close ms | total ms |")
    print("|---|---|---|---|")
    for name, first, close, total in rows:
        print(f"| {name} | {first:.0f} | {close:.0f} | {total:.0f} |")
    ratio = rows[1][3] / rows[0][3]
    print(f"\nkept / per run: {ratio:.3f} of the device's time outside the loop")
    print(f"a bare snapshot on the kept session, same run: {median(bare):.0f} ms (the floor)")


if __name__ == "__main__":
    main()
