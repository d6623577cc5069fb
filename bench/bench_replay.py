"""A remembered run against `agent-device replay` of the same flow, on the real Linux target
(issue 25, item 6).

    python -m bench.bench_replay [--pairs 5]

Sets up the lab: a private desktop, the GTK sign-in app (started and relaunched by our
`AgentDeviceHost`'s `LinuxApp`), our kept daemon, and a second daemon for agent-device's own CLI.
Records the sign-in flow with agent-device itself (`open --save-script`, `fill`, `fill`, `press`,
`close`: a `.ad` script), warms our decision memory with one rules-decided run, then interleaves
pairs of runs, each on a freshly relaunched app (the relaunch is outside both timings):

- replay: `agent-device replay flow.ad` (the CLI process, its daemon already up);
- ours: a memory-hit `run_goal` on a warm worker's host: `open` (health check, session), the
  loop (every step from memory, each action's effect checked), `close` of the session.

Prints the median wall of each, the ratio ours/replay, and our median first-snapshot latency
(open → first snapshot returned).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import structlog

from testing.linux_desktop import start_linux_desktop
from workers.core.app import AppConfig, ResetPolicy
from workers.core.device_hooks import DeviceCommand, DeviceHook, with_hooks
from workers.core.loop import run_goal
from workers.core.memory import InMemoryMemory
from workers.core.model import Inputs, RunStatus
from workers.core.params import RunParams
from workers.decide.rules import RulesDecider
from workers.devices.agent_device.daemon import DEFAULT_PACKAGE_DIR, start_daemon
from workers.devices.agent_device.host import AgentDeviceHost
from workers.stats import median

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "tests" / "apps" / "gtk_signin.py"
CLI = DEFAULT_PACKAGE_DIR / "bin" / "agent-device.mjs"
SPEC = "agent-device:linux"
EMAIL, PASSWORD = "alice@example.com", "bench-not-a-secret"
WELCOME = RunParams(done_when="Welcome")


class FirstSnapshot(DeviceHook):
    """A hook on the run's device: the first snapshot's latency from when the run began
    opening it."""

    def __init__(self, began: float) -> None:
        self.began, self.first_ms = began, 0.0

    def after(self, command: DeviceCommand) -> None:
        if command.name == "snapshot" and not self.first_ms:
            self.first_ms = (time.perf_counter() - self.began) * 1000


def cli(env: dict[str, str], *args: str) -> dict[str, object]:
    out = subprocess.run(
        ["node", str(CLI), *args, "--json"], env=env, capture_output=True, check=True, timeout=60
    )
    return json.loads(out.stdout) if out.stdout.strip() else {}


def record(env: dict[str, str], script: Path) -> None:
    """The sign-in flow, recorded by agent-device's own CLI."""
    cli(env, "open", "--platform", "linux", "--save-script", str(script))
    cli(env, "fill", ref(env, "Email", "TextField"), EMAIL)
    cli(env, "fill", ref(env, "Password", "TextField"), PASSWORD)
    cli(env, "press", ref(env, "Sign in", "Button"))
    cli(env, "close")


def ref(env: dict[str, str], label: str, kind: str) -> str:
    """The ref of the `kind` labelled `label` in a fresh interactive snapshot (a mutation
    invalidates refs)."""
    data = cli(env, "snapshot", "-i").get("data")
    nodes = data.get("nodes", []) if isinstance(data, dict) else []
    return next(
        "@" + n["ref"]
        for n in nodes
        if n.get("label") == label and n.get("type") == kind and n.get("ref")
    )


def signed_in(state: Path, timeout_s: float = 5.0) -> None:
    """The app reached Welcome (checked after the timing: replay does not wait for it)."""
    deadline = time.monotonic() + timeout_s
    while json.loads(state.read_text())["screen"] != "welcome":
        if time.monotonic() > deadline:
            raise SystemExit(f"the replay did not sign in: {state.read_text()}")
        time.sleep(0.05)


def relaunch(host: AgentDeviceHost) -> None:
    """A fresh app on its first screen, outside both timings."""
    assert host.linux_app is not None  # noqa: S101
    host.prepare(None, ResetPolicy.RELAUNCH)
    host.open("relaunch").close()


def hit_run(
    host: AgentDeviceHost, memory: InMemoryMemory, inputs: Inputs, *, settle: bool
) -> tuple[float, float]:
    """One memory-hit run on a relaunched app: its wall ms and its first-snapshot ms. With
    `settle`, the device declines the remembered-action hint (every action waits out
    agent-device's settle window, as before issue 25)."""
    relaunch(host)
    host.prepare(None, ResetPolicy.NONE)
    host.quick_effects = not settle
    t0 = time.perf_counter()
    first = FirstSnapshot(t0)
    dev = with_hooks(host.open("hit"), first)
    result = run_goal(
        dev,
        "Sign in",
        decider=RulesDecider(),
        inputs=inputs,
        params=WELCOME,
        memory=memory,
    )
    dev.close()
    wall = (time.perf_counter() - t0) * 1000
    hits = [r.memory.outcome for r in result.steps if r.memory]
    if result.status is not RunStatus.DONE or set(hits) != {"hit"}:
        why = [(r.memory.why, r.outcome, r.error) for r in result.steps if r.memory]
        raise SystemExit(f"not a memory-hit run: {result.status} {why}")
    skipped = {r.result.settle_skipped for r in result.steps if r.result is not None}
    if skipped != {not settle}:  # the hint reached the device, or was declined, every time
        raise SystemExit(f"settle skipped {skipped}, expected {not settle} on every action")
    return wall, first.first_ms


def main() -> None:  # noqa: PLR0915 - one lab, set up in order
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    inputs = Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD})
    memory = InMemoryMemory(decider="rules")
    with tempfile.TemporaryDirectory(prefix="gf-bench-replay-") as tmp:
        base = Path(tmp)
        with start_linux_desktop(base / "desk") as desk:
            state = base / "app.json"
            command = f"/usr/bin/env GTK_SIGNIN_STATE_FILE={state} /usr/bin/python3 {APP}"
            served = AppConfig(id="signin", command=command, reset=ResetPolicy.NONE)
            host = AgentDeviceHost(SPEC, app=served, env=desk.env, state_root=base / "ours")
            replay_dir = base / "replay"
            theirs = start_daemon(replay_dir, env=desk.env, claims_dir=replay_dir / "claims")
            cli_env = {**os.environ, **desk.env, "AGENT_DEVICE_STATE_DIR": str(replay_dir)}
            script = base / "flow.ad"
            try:
                relaunch(host)
                record(cli_env, script)
                relaunch(host)
                host.prepare(None, ResetPolicy.NONE)
                dev = host.open("warm")
                warm = run_goal(
                    dev,
                    "Sign in",
                    decider=RulesDecider(),
                    inputs=inputs,
                    params=WELCOME,
                    memory=memory,
                )
                dev.close()
                if warm.status is not RunStatus.DONE:
                    raise SystemExit(f"the warm-up run ended {warm.status}: {warm.reason}")
                ours, settled, theirs_ms, first = [], [], [], []
                for _ in range(args.pairs):
                    relaunch(host)
                    t0 = time.perf_counter()
                    subprocess.run(
                        ["node", str(CLI), "replay", str(script)],
                        env=cli_env,
                        check=True,
                        capture_output=True,
                        timeout=60,
                    )
                    theirs_ms.append((time.perf_counter() - t0) * 1000)
                    signed_in(state)
                    for settle, into in ((False, ours), (True, settled)):
                        ms, first_ms = hit_run(host, memory, inputs, settle=settle)
                        into.append(ms)
                        if not settle:
                            first.append(first_ms)
            finally:
                host.close()
                theirs.stop()
    o, st, t = median(ours), median(settled), median(theirs_ms)
    print(f"GTK sign-in app on Xvfb, {args.pairs} interleaved triples, daemons up, medians\n")
    print("| run | wall ms | / replay |")
    print("|---|---|---|")
    print(f"| `agent-device replay` (its CLI, daemon up) | {t:.0f} | 1.00 |")
    print(f"| goalfleet memory-hit run, warm worker | {o:.0f} | {o / t:.2f} |")
    print(f"| the same, every action settled (as before) | {st:.0f} | {st / t:.2f} |")
    print(f"\nour first-snapshot latency (open → first snapshot): {median(first):.0f} ms")
    print(f"ours: {[round(x) for x in ours]}; settled: {[round(x) for x in settled]}")
    print(f"replay: {[round(x) for x in theirs_ms]}")


if __name__ == "__main__":
    main()
