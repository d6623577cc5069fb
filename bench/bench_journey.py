"""A journey's wall time, first run vs from memory, in the same run (issue 43, docs/benchmarks.md).

The 8-step journey of tests/journeykit.py (sign in → Settings → scroll until Appearance →
press it → Dark mode → back → back → a plain-text check), plus a natural-language check on
the Appearance screen, on the sim `settings` app at real-device latencies
(`Latencies`: snapshot 100 ms, press 650 ms, fill 750 ms). Two deciders at the seam:

- `model`: a stand-in that answers as the rules do after a fixed `--model-ms` (default 1,000 ms,
  an assumption: a small hosted model's call; the decider calls are printed, so the figure
  can be rescaled);
- `rules`: the rules decider (no model) on the journey without the natural-language check, to
  show what memory saves on the device alone (a remembered action skips the settle window).

Per decider, on one fleet-wide memory: round 1 on a fresh iOS device (the decider decides),
round 2 on another fresh iOS device (every goal step and check from memory).

    .venv/bin/python -m bench.bench_journey            # full
    .venv/bin/python -m bench.bench_journey --quick    # CI: proves it runs (no latencies)
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any

from workers.core.journey import run_journey
from workers.core.memory import InMemoryMemory
from workers.core.model import DecideState, Decision, Inputs, RunResult, RunStatus
from workers.core.ports import Decider
from workers.core.request import GoalRunRequest
from workers.decide.rules import RulesDecider
from workers.devices.sim.device import make_sim_device

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from journeykit import EMAIL, JOURNEY, PASSWORD

STEPS = [*JOURNEY[:5], {"check": "dark mode is on"}, *JOURNEY[5:]]


class StandIn:
    """The rules' answers after `ms` of "model" time; a check cites the Dark mode switch."""

    def __init__(self, ms: float) -> None:
        self.ms, self.calls, self.rules = ms, 0, RulesDecider()

    def decide(self, state: DecideState) -> Decision:
        self.calls += 1
        time.sleep(self.ms / 1000)
        if state.goal.startswith("Check"):
            ref = next(c.ref for c in state.candidates if c.name == "Dark mode")
            return Decision(done=True, target=ref, reason="the switch", decided_by="model")
        return self.rules.decide(state).model_copy(update={"decided_by": "model"})


def _once(
    decider: Decider, memory: InMemoryMemory, scale: float, seed: int, raw: list[Any]
) -> RunResult:
    steps = GoalRunRequest.model_validate({"steps": raw}).steps or []
    device = make_sim_device("sim:settings-ios", latency_scale=scale, seed=seed)
    result = run_journey(
        device,
        "journey",
        steps=steps,
        decider=decider,
        inputs=Inputs.of(plain={"email": EMAIL}, secret={"password": PASSWORD}),
        memory=memory,
    )
    if result.status is not RunStatus.DONE:
        raise SystemExit(f"the journey did not pass: {result.reason}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="no latencies (CI)")
    parser.add_argument("--model-ms", type=float, default=1000.0)
    args = parser.parse_args(argv)
    scale, model_ms = (0.0, 0.0) if args.quick else (1.0, args.model_ms)
    rows: list[tuple[object, ...]] = []
    deciders: list[tuple[str, Decider, list[Any]]] = [
        ("model", StandIn(model_ms), STEPS),
        ("rules", RulesDecider(), JOURNEY),  # no natural-language check: rules cannot answer
    ]
    for name, decider, raw in deciders:
        memory = InMemoryMemory(decider=name)
        for round_, seed in (("first run", 1), ("from memory", 2)):
            t0 = time.perf_counter()
            result = _once(decider, memory, scale, seed, raw)
            wall = time.perf_counter() - t0
            calls = sum(j.decider_calls for j in result.journey)
            labels = " ".join(j.source for j in result.journey)
            rows.append((name, round_, f"{wall:.2f}", len(result.steps), calls, labels))
    print(f"python {platform.python_version()}, latency scale {scale}, model {model_ms:g} ms")
    print("| decider | round | wall s | rows | model calls | step labels |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
