"""A run's video on the Linux target: bytes and worker CPU per video-second.

A private desktop, the GTK sign-in app and an agent-device daemon; each trial films the app's
window (`X11Recording`: ffmpeg x11grab, VP8 WebM at 5 fps) for `--seconds` while the bench
types into the e-mail field twice a second (a run's screen changes a few times a second),
then paints a box over the field for the whole clip (`FfmpegFilms`, as a secret's fill would)
and without boxes (what a run with no secret stores: the clip as recorded). Per trial:

- record CPU: ffmpeg's user+system CPU while filming (`RUSAGE_CHILDREN`, reaped at stop),
- paint CPU: the re-encode with the box (its own child),
- bytes: the clip as recorded, and painted,

each per video-second; the baseline from the same trials is the wall time (CPU as a share of
one core) and the bench process's own CPU over the same seconds (the adapter's typing and
snapshots: what a run costs the worker without a video).

    .venv/bin/python -m bench.bench_video               # 5 trials of 10 s
    .venv/bin/python -m bench.bench_video --trials 2 --seconds 5
"""

from __future__ import annotations

import argparse
import logging
import resource
import time

import structlog
from pydantic import SecretStr

from bench._signin import signin_lab
from workers.core.model import InputValue, Platform
from workers.core.shots import Rect
from workers.core.video import Box
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.video import FPS, FfmpegFilms, X11Recording
from workers.stats import median


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def trial(dev: AgentDeviceDevice, display: str, seconds: float) -> dict[str, float]:
    snap = dev.snapshot()
    window = dev._bounds.window  # noqa: SLF001 - the bench films what `record` films
    field = next(c for c in snap.candidates if c.name == "Email")
    node = next(n for n in snap.nodes if n.ref == field.ref)
    if window is None or node.rect is None:
        raise SystemExit("the snapshot gave no window or no bounds for the e-mail field")
    c0, p0, t0 = children_cpu_s(), time.process_time(), time.perf_counter()
    rec = X11Recording(display, window)
    typed = 0
    while time.perf_counter() - t0 < seconds:
        value = InputValue(name="email", value=SecretStr(f"user{typed}@example.com"))
        dev.fill(snap.pin(field.ref), value)
        snap = dev.snapshot()
        field = next(c for c in snap.candidates if c.name == "Email")
        typed += 1
        time.sleep(max(0.0, 0.5 - (time.perf_counter() - t0) % 0.5))
    clip = rec.stop()
    wall = time.perf_counter() - t0
    record_cpu, own_cpu = children_cpu_s() - c0, time.process_time() - p0
    x, y, w, h = node.rect
    box = Box(rect=Rect(x=x - window.x, y=y - window.y, w=w, h=h), start=0.0, end=wall)
    c1 = children_cpu_s()
    painted = FfmpegFilms().finish(clip, (box,), max_bytes=1 << 30)
    paint_cpu = children_cpu_s() - c1
    raw = FfmpegFilms().finish(clip, (), max_bytes=1 << 30)
    rec.discard()
    if painted is None or raw is None:
        raise SystemExit("a clip did not fit 1 GiB")
    return {
        "wall_s": wall,
        "record_cpu_ms_per_s": record_cpu * 1000 / wall,
        "paint_cpu_ms_per_s": paint_cpu * 1000 / wall,
        "own_cpu_ms_per_s": own_cpu * 1000 / wall,
        "raw_bytes_per_s": len(raw) / wall,
        "painted_bytes_per_s": len(painted) / wall,
        "typed": typed,
        "size": window.w * window.h,
    }


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="trials (default 5)")
    parser.add_argument("--seconds", type=float, default=10.0, help="video seconds a trial")
    return parser.parse_args()


def main() -> None:
    args = options()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with signin_lab() as (desk, d):
        dev = AgentDeviceDevice.connect(d.state_dir, platform=Platform.LINUX, display=desk.display)
        try:
            rows = [trial(dev, desk.display, args.seconds) for _ in range(args.trials)]
        finally:
            dev.close()

    def med(key: str) -> float:
        return median([r[key] for r in rows])

    print(
        f"{args.trials} trials of {args.seconds:.0f} s, {FPS} fps, window "
        f"{int(med('size'))} px, {med('typed'):.0f} fills a trial\n"
        "| per video-second (median) | value |\n|---|---|\n"
        f"| ffmpeg recording CPU ms | {med('record_cpu_ms_per_s'):.1f} "
        f"({med('record_cpu_ms_per_s') / 10:.1f} % of one core) |\n"
        f"| ffmpeg painting CPU ms (one box, whole clip) | {med('paint_cpu_ms_per_s'):.1f} |\n"
        f"| the bench's own CPU ms (typing, snapshots: the run without video) | "
        f"{med('own_cpu_ms_per_s'):.1f} |\n"
        f"| bytes as recorded | {med('raw_bytes_per_s'):.0f} |\n"
        f"| bytes painted | {med('painted_bytes_per_s'):.0f} |\n"
        f"| recording CPU / the run's own CPU | "
        f"{med('record_cpu_ms_per_s') / max(med('own_cpu_ms_per_s'), 1e-9):.2f} |"
    )


if __name__ == "__main__":
    main()
