"""The size of a suite's reports at 200 steps with a picture each, and the time to make them
(no fleet: the runs and rows are made here, the pictures are the sim's own drawings of its
screens: the same bytes for every step, under a distinct artifact id each, so each one is
downscaled as a distinct picture would be).

- the HTML report (self-contained: pictures downscaled to `THUMB_WIDTH`, embedded while the
  report's budget lasts, linked after) against the 200 originals it never embeds;
- the JUnit XML (steps in system-out, pictures as attachment lines);
- milliseconds to downscale the pictures and render both, median of `--rounds`.

    .venv/bin/python -m bench.bench_report             # 200 steps, 5 rounds
    .venv/bin/python -m bench.bench_report --steps 50 --rounds 3
"""

from __future__ import annotations

import argparse
import time

from bench._fleet import machine, median
from scheduler.suites.html import to_html
from scheduler.suites.junit import to_xml
from scheduler.suites.outcome import THUMB_BUDGET, Report, attach_pictures, cases
from workers.core.model import Action, ActionKind, Decision, Outcome, RunStatus, StepRow
from workers.core.records import BatchRecord, RunRecord
from workers.core.request import GoalRunRequest
from workers.devices.sim.device import make_sim_device


def rows(n: int) -> list[StepRow]:
    decision = Decision(target="e2", input="email", confidence=0.9, decided_by="rules")
    action = Action(kind=ActionKind.FILL, ref="e2", pinned="@e2~s1", input="email",
                    shown_value="{email}")  # fmt: skip
    return [
        StepRow(index=i, screen=f"Screen {i}", refs_generation="1", candidates=3,
                decision=decision, action=action, outcome=Outcome.ACTED,
                screenshot=f"{i:064x}")  # a picture of its own: nothing shared
        for i in range(1, n + 1)
    ]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    for device in ("sim:signin-ios", "sim:wide-android"):
        sim = make_sim_device(device)
        sim.snapshot()
        png = sim.screenshot().png
        run = RunRecord(id="r" * 32, request=GoalRunRequest(goal="Sign in"), target="d1",
                        device="d1", status=RunStatus.DONE, submitted_at=0.0, flow="long")  # fmt: skip
        batch = BatchRecord(id="b" * 32, total=1, created_at=0.0, suite="bench")
        ms, html, xml = [], b"", b""
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            found = attach_pictures(cases([run], lambda _r: rows(args.steps)), lambda *_, p=png: p)
            report = Report(batch, found, time.time())
            html = to_html(report, attachments="pictures").encode()
            xml = to_xml(report, attachments="pictures")
            ms.append((time.perf_counter() - t0) * 1000)
        originals = args.steps * len(png)
        print(f"{device}: {args.steps} steps, picture {len(png) / 1000:.1f} kB "
              f"(originals {originals / 1e6:.2f} MB): HTML {len(html) / 1e6:.2f} MB "
              f"({len(html) / originals:.2f}x the originals, budget {THUMB_BUDGET / 1e6:.1f} MB "
              f"of pictures), JUnit {len(xml) / 1e3:.0f} kB, {median(ms):.0f} ms to make both "
              f"(median of {args.rounds})")  # fmt: skip
    print(machine())


if __name__ == "__main__":
    main()
