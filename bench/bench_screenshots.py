"""Step screenshots: what a picture costs against a snapshot, and what a run stores.

The loop on a zero-latency sim device (`sim:privacy-ios`: cookie dialog, phone, code, in;
and `sim:signin-ios`: email, password, welcome), rules decider, the real camera
(`workers.fleet.artifacts.FileArtifacts` in a temporary directory, `PillowPictures`), N runs
of each flow. Per step, from the rows and a timing wrapper at the `Pictures` seam:

- snapshot: `snapshot_ms` (the sim's accessibility tree),
- screenshot: `screenshot_ms` (the sim draws its screen to a PNG),
- finish + store: mask, mark, palette PNG, sha256, file write (first put) or exists check.

Bytes: the pictures one run references (before content addressing), and the directory after
all N runs (after it: the same screen in every run is one file).

    .venv/bin/python -m bench.bench_screenshots           # 1,000 runs of each flow
    .venv/bin/python -m bench.bench_screenshots --quick   # CI: 20 runs
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from workers.core.loop import run_goal
from workers.core.model import Inputs, RunStatus
from workers.core.shots import Camera, Rect, Screenshot
from workers.decide.rules import RulesDecider
from workers.devices.pictures import PillowPictures
from workers.devices.sim.apps import OTP_CODE
from workers.devices.sim.device import SimDevice, make_sim_device
from workers.fleet.artifacts import FileArtifacts
from workers.stats import median, percentile

FLOWS = {
    "privacy": Inputs.of(
        {"phone": "5551234567"}, {"code": OTP_CODE}, plain_fields=frozenset({"code"})
    ),
    "signin": Inputs.of({"email": "ada@example.com"}, {"password": "pw-of-ada-1"}),
}


@dataclass
class Timed:
    """`PillowPictures` with its time per call recorded (the bench's wrapper at our seam):
    wall ms, and this process's CPU ms (`time.process_time`)."""

    inner: PillowPictures = field(default_factory=PillowPictures)
    ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)

    def finish(
        self, shot: Screenshot, *, mask: tuple[Rect, ...], mark: Rect | None, max_bytes: int
    ) -> bytes | None:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return self.inner.finish(shot, mask=mask, mark=mark, max_bytes=max_bytes)
        finally:
            self.ms.append((time.perf_counter() - t0) * 1000)
            self.cpu_ms.append((time.process_time() - c0) * 1000)


def cpu_timed_screenshots(device: SimDevice, cpu_ms: list[float]) -> SimDevice:
    """`device` with the CPU ms of each `screenshot` (the sim drawing its screen) recorded."""
    take = device.screenshot

    def screenshot() -> Screenshot:
        c0 = time.process_time()
        try:
            return take()
        finally:
            cpu_ms.append((time.process_time() - c0) * 1000)

    device.screenshot = screenshot  # type: ignore[method-assign]
    return device


@dataclass
class TimedStore:
    inner: FileArtifacts
    ms: list[float] = field(default_factory=list)

    def put(self, data: bytes) -> str:
        t0 = time.perf_counter()
        try:
            return self.inner.put(data)
        finally:
            self.ms.append((time.perf_counter() - t0) * 1000)

    def get(self, artifact_id: str) -> bytes | None:
        return self.inner.get(artifact_id)


def flow(app: str, runs: int, root: Path) -> dict[str, float]:
    store = TimedStore(FileArtifacts(root))
    pictures = Timed()
    camera = Camera(store, pictures)
    snap_ms: list[float] = []
    shot_ms: list[float] = []
    per_run: list[int] = []
    draw_cpu: list[float] = []
    first_run_pictures = 0
    steps = 0
    started = time.perf_counter()
    for seed in range(runs):
        result = run_goal(
            cpu_timed_screenshots(make_sim_device(f"sim:{app}-ios", seed=seed), draw_cpu),
            "Sign in",
            decider=RulesDecider(),
            inputs=FLOWS[app],
            camera=camera,
            sleep=lambda _: None,
        )
        if result.status is not RunStatus.DONE:
            raise SystemExit(f"sim:{app}-ios ended {result.status}: {result.reason}")
        steps += len(result.steps)
        first_run_pictures = first_run_pictures or len(draw_cpu)
        snap_ms += [r.snapshot_ms for r in result.steps]
        shot_ms += [r.screenshot_ms for r in result.steps]
        per_run.append(
            sum(len(store.get(r.screenshot) or b"") for r in result.steps if r.screenshot)
        )
    wall = time.perf_counter() - started
    picture_cpu = [a + b for a, b in zip(draw_cpu, pictures.cpu_ms, strict=True)]
    files = list(root.rglob("*.png"))
    return {
        "runs": runs,
        "steps/run": steps / runs,
        "snapshot ms p50": median(snap_ms),
        "snapshot ms p95": percentile(snap_ms, 95),
        "screenshot ms p50": median(shot_ms),
        "screenshot ms p95": percentile(shot_ms, 95),
        "finish ms p50": median(pictures.ms),
        "picture CPU ms p50 (draw + finish)": median(picture_cpu),
        "first run's picture CPU ms p50": median(picture_cpu[:first_run_pictures]),
        "store put ms p50": median(store.ms),
        "bytes/run": median([float(b) for b in per_run]),
        "files": len(files),
        "bytes on disk": sum(f.stat().st_size for f in files),
        "bytes/run x runs (no dedup)": sum(per_run),
        "wall s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="20 runs of each flow")
    args = ap.parse_args()
    runs = 20 if args.quick else args.runs
    results = {}
    for app in FLOWS:
        with tempfile.TemporaryDirectory(prefix="gf-shots-") as tmp:
            results[app] = flow(app, runs, Path(tmp))
    keys = list(next(iter(results.values())))
    print("| measure | " + " | ".join(f"sim:{a}-ios" for a in results) + " |")
    print("| --- | " + " | ".join("---:" for _ in results) + " |")
    for k in keys:
        cells = [
            f"{r[k]:,.3f}" if isinstance(r[k], float) and r[k] < 100 else f"{r[k]:,.0f}"
            for r in results.values()
        ]
        print(f"| {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
