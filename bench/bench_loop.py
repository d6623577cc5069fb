"""Loop overhead: our own cost per step, over a zero-latency sim device and a scripted decider.

Screen: the sim `wide` app (20 candidates). Per step the loop snapshots, decides, presses with
settle. "Ours" is the time run_goal spends outside the device and decider calls (judging,
pinning, rows, history, retries wrapper) plus candidate projection, which runs inside every
real adapter's snapshot. Baseline, same run: the bare device + decider calls done in a plain
loop with no run_goal.

    .venv/bin/python -m bench.bench_loop            # full
    .venv/bin/python -m bench.bench_loop --quick    # CI: proves it runs
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass

from workers.core.loop import run_goal
from workers.core.model import ActionResult, DecideState, Decision, InputValue, Snapshot
from workers.core.params import RunParams
from workers.core.ports import Device
from workers.core.projection import build_snapshot
from workers.devices.sim.device import SimDevice, make_sim_device
from workers.stats import median, tail

STEPS = 50
PARAMS = RunParams(max_steps=STEPS)


@dataclass
class Timed(Device):
    """Wraps the device and the decider and adds up the time spent inside them."""

    device: SimDevice
    inside: float = 0.0
    projection: float = 0.0
    i: int = 0

    @property
    def platform(self):  # noqa: ANN201
        return self.device.platform

    def snapshot(self) -> Snapshot:
        t = time.perf_counter()
        snap = self.device.snapshot()
        self.inside += time.perf_counter() - t
        t = time.perf_counter()  # what projection alone costs on these nodes (ours)
        build_snapshot(snap.nodes, snap.refs_generation)
        self.projection += time.perf_counter() - t
        return snap

    def press(self, pinned_ref: str) -> ActionResult:
        t = time.perf_counter()
        # every press counts as productive, so a run takes all STEPS steps (the wide app's
        # options change nothing, and max_unproductive is capped at 20)
        r = self.device.press(pinned_ref).model_copy(update={"changed": True})
        self.inside += time.perf_counter() - t
        return r

    def fill(self, pinned_ref: str, value: InputValue) -> ActionResult:
        raise NotImplementedError

    def close(self) -> None:
        self.device.close()

    def decide(self, state: DecideState) -> Decision:
        t = time.perf_counter()
        self.i += 1
        opts = [c for c in state.candidates if c.name.startswith("Option")]
        d = Decision(target=opts[self.i % len(opts)].ref, confidence=0.9)
        self.inside += time.perf_counter() - t
        return d


def one_loop_run() -> tuple[float, float, float]:
    """(total per step, inside per step, projection per step) in seconds, for run_goal."""
    timed = Timed(make_sim_device("sim:wide-ios"))
    t = time.perf_counter()
    result = run_goal(timed, "Sign in", decider=timed, params=PARAMS)
    total = time.perf_counter() - t
    n = len(result.steps)
    # the timing wrapper's own projection call is not part of the loop: take it out
    return (total - timed.projection) / n, timed.inside / n, timed.projection / n


def one_bare_run() -> float:
    """Per step, the same device + decider work in a plain loop (baseline)."""
    timed = Timed(make_sim_device("sim:wide-ios"))
    t = time.perf_counter()
    for step in range(1, STEPS + 1):
        snap = timed.device.snapshot()
        state = DecideState(
            goal="Sign in",
            step=step,
            candidates=snap.candidates,
            context=snap.context,
            input_names=(),
        )
        d = timed.decide(state)
        timed.device.press(snap.pin(d.target))
    return (time.perf_counter() - t) / STEPS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    runs = 5 if ap.parse_args().quick else 200
    loop, inside, proj, bare = [], [], [], []
    for _ in range(runs):  # interleaved so machine noise hits both alike
        total, ins, p = one_loop_run()
        loop.append(total)
        inside.append(ins)
        proj.append(p)
        bare.append(one_bare_run())
    overhead = [t - i for t, i in zip(loop, inside, strict=True)]
    med = median
    cands = len(make_sim_device("sim:wide-ios").snapshot().candidates)
    print(
        f"# Loop overhead ({runs} runs x {STEPS} steps, {cands} candidates, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()})\n"
    )
    print(f"| measure | median per step | {tail(loop)[0]} per step |")
    print("| --- | ---: | ---: |")

    def row(name: str, xs: list[float]) -> None:
        print(f"| {name} | {med(xs) * 1e3:.3f} ms | {tail(xs)[1] * 1e3:.3f} ms |")

    row("run_goal step, total", loop)
    row("inside device + decider", inside)
    row("**loop overhead (ours)**", overhead)
    row("candidate projection (ours, inside snapshot)", proj)
    row("baseline: bare device + decider loop", bare)
    ratio = med(loop) / med(bare)
    print(
        f"\nrun_goal / bare loop: {ratio:.2f}x; "
        f"our cost per step incl. projection: {(med(overhead) + med(proj)) * 1e3:.3f} ms "
        "(goal <= 1 ms)"
    )


if __name__ == "__main__":
    main()
