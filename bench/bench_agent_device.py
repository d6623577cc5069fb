"""Our adapter's per-command overhead over the daemon's own time, on the real Linux target.

    .venv/bin/python bench/bench_agent_device.py [--n 30]

Starts a private desktop, the GTK sign-in app and a daemon, then times `snapshot`,
`press` (+settle, "Forgot password?", which changes nothing so it repeats) and `fill`
(+settle, the email field) through `AgentDeviceDevice`, over the socket and the HTTP transport.
A timing wrapper around the transport measures, per call and in the same run, the time spent in
the transport (daemon work + loopback I/O); the adapter's overhead is the rest (building the
request, mapping the reply, projecting the snapshot, logging). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import structlog
from pydantic import SecretStr

from bench._signin import signin_lab
from workers.core.model import InputValue, Platform
from workers.devices.agent_device.daemon import DaemonProcess
from workers.devices.agent_device.device import AgentDeviceDevice, check_daemon
from workers.devices.agent_device.wire import (
    DaemonTransport,
    HttpTransport,
    JsonObject,
    SocketTransport,
)
from workers.stats import median, percentile


class TimingTransport:
    """Wraps a transport and records how long each request spent inside it."""

    def __init__(self, inner: DaemonTransport) -> None:
        self.inner = inner
        self.last_ms = 0.0

    def request(self, body: JsonObject) -> JsonObject:
        t0 = time.perf_counter()
        try:
            return self.inner.request(body)
        finally:
            self.last_ms = (time.perf_counter() - t0) * 1000

    def close(self) -> None:
        self.inner.close()


def measure(
    wire: TimingTransport, call: Callable[[], object], n: int
) -> tuple[list[float], list[float]]:
    totals, overheads = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        total = (time.perf_counter() - t0) * 1000
        totals.append(total)
        overheads.append(total - wire.last_ms)
    return totals, overheads


def bench_transport(kind: str, d: DaemonProcess, n: int, quiet_ms: int) -> list[str]:
    token = d.info.token.get_secret_value()
    inner: DaemonTransport
    if kind == "http":
        if d.info.http_port is None:
            raise SystemExit("the daemon has no HTTP port")
        inner = HttpTransport("127.0.0.1", d.info.http_port, token)
    else:
        inner = SocketTransport("127.0.0.1", d.info.port)
    wire = TimingTransport(inner)
    rec = d.state_dir / "scripts" / f"bench-{kind}.ad"
    rec.parent.mkdir(exist_ok=True)
    dev = AgentDeviceDevice(
        wire,
        token=token,
        platform=Platform.LINUX,
        session=f"bench-{kind}",
        record_script=rec,
        settle_quiet_ms=quiet_ms,
    )
    dev.open()
    rows = []
    try:
        dev.snapshot()
        rows.append(row(kind, "snapshot", *measure(wire, dev.snapshot, n)))
        email = InputValue(name="email", value=SecretStr("bench@example.com"))
        for name in ("press+settle", "fill+settle"):
            totals, overheads = [], []
            for _ in range(n):
                s = dev.snapshot()
                wanted = "Forgot password?" if name == "press+settle" else "Email"
                pinned = s.pin(next(c.ref for c in s.candidates if c.name == wanted))
                call: Callable[[], object] = (
                    functools.partial(dev.press, pinned)
                    if name == "press+settle"
                    else functools.partial(dev.fill, pinned, email)
                )
                t, o = measure(wire, call, 1)
                totals += t
                overheads += o
            rows.append(row(kind, f"{name} (quiet {quiet_ms} ms)", totals, overheads))
    finally:
        dev.close()
    return rows


def row(kind: str, name: str, totals: list[float], overheads: list[float]) -> str:
    med = median
    p95 = percentile(overheads, 95)
    return (
        f"| {kind} | {name} | {len(totals)} | {med(totals):.1f} | "
        f"{med(totals) - med(overheads):.1f} | {med(overheads):.2f} | {p95:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--quiet-ms", type=int, default=150)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    with signin_lab() as (_, d):
        check_daemon(d.info)
        rows = []
        for kind in ("socket", "http"):
            rows += bench_transport(kind, d, args.n, args.quiet_ms)
    version = d.info.version
    print(f"agent-device {version}, GTK sign-in app on Xvfb, n={args.n} per row\n")
    print(
        "| transport | command | n | median total ms | median in transport ms "
        "| median adapter overhead ms | p95 overhead ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
