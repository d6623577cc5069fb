"""A batch as a report reads it: one case per flow x device, its attempts in order (each with
its own step rows and pictures), and a verdict that tells a pass on retry (`flaky`) and an
infrastructure failure (`errored`: the device, the model's transport, the worker) from a
decision failure (`failed`: blocked, escalated, max-steps).

    report = collect(client, batch_id)      # through the API: runs, rows, pictures
    report.cases[0].verdict                 # "passed" | "flaky" | "failed" | "errored" | ...
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from PIL import Image

from scheduler.client.api_client import ApiError, FleetClient
from workers.core.journey import step_headings
from workers.core.model import RunStatus, StepRow
from workers.core.records import BatchRecord, RunRecord

Verdict = Literal["passed", "flaky", "failed", "errored", "cancelled", "incomplete"]
DECISION_FAILURES = frozenset(
    {RunStatus.BLOCKED, RunStatus.ESCALATED, RunStatus.MAX_STEPS, RunStatus.OVER_BUDGET}
)
"""The decider could not reach the goal: the app (or the flow) is wrong."""
INFRA_FAILURES = frozenset({RunStatus.ERRORED, RunStatus.UNPLACEABLE})
"""Something under the run failed: the device, the model's transport, the worker, the fleet."""
THUMB_WIDTH = 200
"""A step's picture in a report: downscaled to this width (a report never holds originals)."""
THUMB_BUDGET = 3_000_000
"""The most bytes of pictures one report embeds; past it, steps keep a link only."""


def failure_kind(status: RunStatus) -> Literal["decision", "infrastructure", ""]:
    if status in DECISION_FAILURES:
        return "decision"
    if status in INFRA_FAILURES:
        return "infrastructure"
    return ""


@dataclass(frozen=True)
class Picture:
    name: str
    """The file name the picture has beside the reports (`<run8>-<step>.png`)."""
    original: bytes
    thumb: bytes | None
    """The picture at `THUMB_WIDTH` (`_thumb`), or None past the report's budget."""


@dataclass(frozen=True)
class Attempt:
    run: RunRecord
    steps: list[StepRow]
    pictures: dict[int, Picture] = field(default_factory=dict)
    final: Picture | None = None
    """The picture of the screen a failed run ended on (its failure report's)."""
    video: Picture | None = None
    """The run's video (`<run8>-video.webm`, secrets painted over), linked, never embedded."""

    @property
    def files(self) -> list[Picture]:
        """What the attempt writes beside the reports: its pictures, final one, video."""
        return [*self.pictures.values(), *(p for p in (self.final, self.video) if p is not None)]

    @property
    def status(self) -> RunStatus:
        return self.run.status

    @property
    def cost(self) -> float:
        """What its model calls cost by the operator's price table (0: unpriced, or none)."""
        r = self.run.result
        return r.totals.cost if r is not None else 0.0

    @property
    def seconds(self) -> float:
        r = self.run
        if r.result is not None and r.result.duration_ms:
            return r.result.duration_ms / 1000
        if r.started_at and r.finished_at:
            return max(0.0, r.finished_at - r.started_at)
        return 0.0

    def headings(self) -> dict[int, str]:
        """A journey's step headings by the index of each step's first row
        (`workers.core.journey.step_headings`); {} for a one-goal run."""
        return step_headings(self.run.result, self.steps)


@dataclass(frozen=True)
class Case:
    flow: str
    device: str
    platform: str
    attempts: list[Attempt]

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]

    @property
    def verdict(self) -> Verdict:
        last = self.last.status
        if not last.terminal:
            return "incomplete"
        if last is RunStatus.DONE:
            return "flaky" if len(self.attempts) > 1 else "passed"
        if last is RunStatus.CANCELLED:
            return "cancelled"
        return "errored" if last in INFRA_FAILURES else "failed"


@dataclass(frozen=True)
class Report:
    batch: BatchRecord
    cases: list[Case]
    made_at: float

    @property
    def title(self) -> str:
        return self.batch.suite or self.batch.goal or self.batch.id[:8]

    @property
    def cost(self) -> float:
        """What every attempt of every case cost (retries too: they were paid for)."""
        return sum(a.cost for c in self.cases for a in c.attempts)

    def count(self, verdict: Verdict) -> int:
        return sum(1 for c in self.cases if c.verdict == verdict)

    def failed(self, *, allow_flaky: bool) -> list[Case]:
        """The cases that fail CI: every one not passed (flaky too, unless allowed)."""
        ok = {"passed", "flaky"} if allow_flaky else {"passed"}
        return [c for c in self.cases if c.verdict not in ok]


FLAT_ENOUGH = 8_000
"""A thumbnail PNG this small is kept without trying a JPEG (a flat app screen)."""


def _thumb(png: bytes) -> bytes:
    """`png` at `THUMB_WIDTH`: a 32-colour PNG, or a JPEG when that is smaller (a photo-like
    screen). Bilinear with a reducing gap: a quarter of Lanczos' time, alike at this size."""
    with Image.open(io.BytesIO(png)) as img:
        img.thumbnail((THUMB_WIDTH, THUMB_WIDTH * 4), Image.Resampling.BILINEAR, reducing_gap=2.0)
        rgb = img.convert("RGB")
    flat = io.BytesIO()
    rgb.quantize(colors=32, method=Image.Quantize.FASTOCTREE).save(flat, format="PNG")
    if flat.tell() <= FLAT_ENOUGH:
        return flat.getvalue()
    photo = io.BytesIO()
    rgb.save(photo, format="JPEG", quality=70, optimize=True)
    return min(flat.getvalue(), photo.getvalue(), key=len)


def thumb_type(data: bytes) -> str:
    return "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"


def cases(runs: list[RunRecord], steps: Callable[[RunRecord], list[StepRow]]) -> list[Case]:
    """Runs grouped into cases (flow, or goal, x device), attempts in retry order."""
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for run in runs:
        key = (run.flow or run.request.goal, run.target or run.device or run.id[:8])
        groups.setdefault(key, []).append(run)
    out = []
    for (flow, device), attempts in groups.items():
        attempts.sort(key=lambda r: (r.retry, r.submitted_at))
        platform = next((r.selector.platform.value for r in attempts if r.selector and
                         r.selector.platform), "")  # fmt: skip
        out.append(Case(flow, device, platform, [Attempt(r, steps(r)) for r in attempts]))
    out.sort(key=lambda c: (c.flow, c.device))
    return out


FINAL = 0
"""The index `attach_pictures` asks its `fetch` for a failed run's final picture by."""
VIDEO = -1
"""The index `attach_pictures` asks its `fetch` for a run's video by."""


def _final_id(run: RunRecord) -> str | None:
    failure = run.result.failure if run.result is not None else None
    return failure.final.screenshot if failure is not None else None


def attach_pictures(
    found: list[Case], fetch: Callable[[str, int], bytes | None], *, budget: int = THUMB_BUDGET
) -> list[Case]:
    """`found` with each step's picture (`fetch(run_id, index)`, None when it has gone) and a
    failed run's final one (`fetch(run_id, FINAL)`): downscaled and embedded while `budget`
    bytes of thumbnails last, linked only after."""
    left = budget
    thumbs: dict[str, bytes] = {}  # by artifact id: a screen seen twice is downscaled once

    def picture(run_id: str, index: int, artifact: str | None, name: str) -> Picture | None:
        nonlocal left
        png = fetch(run_id, index) if artifact is not None else None
        if png is None or artifact is None:
            return None
        thumb = None
        if left > 0:
            thumb = thumbs.get(artifact) or _thumb(png)
            thumbs[artifact] = thumb
        left -= len(thumb or b"")
        return Picture(f"{run_id[:8]}-{name}.png", png, thumb)

    def video(run: RunRecord) -> Picture | None:
        artifact = run.result.video if run.result is not None else None
        data = fetch(run.id, VIDEO) if artifact is not None else None
        return None if data is None else Picture(f"{run.id[:8]}-video.webm", data, None)

    out = []
    for case in found:
        attempts = []
        for a in case.attempts:
            shots: dict[int, Picture] = {}
            for row in a.steps:
                p = picture(a.run.id, row.index, row.screenshot, str(row.index))
                if p is not None:
                    shots[row.index] = p
            final = picture(a.run.id, FINAL, _final_id(a.run), "final")
            attempts.append(Attempt(a.run, a.steps, shots, final, video(a.run)))
        out.append(Case(case.flow, case.device, case.platform, attempts))
    return out


def collect(
    client: FleetClient,
    batch_id: str,
    *,
    pictures: bool = True,
    budget: int = THUMB_BUDGET,
) -> Report:
    """The batch's report through the API: its runs (every attempt), their rows, and each
    step's picture (`attach_pictures`)."""
    batch = client.batch(batch_id)
    runs = client.batch_runs(batch.id)
    platforms = {d.info.id: d.info.platform.value for d in client.devices()}
    found = [
        Case(c.flow, c.device, c.platform or platforms.get(c.device, ""), c.attempts)
        for c in cases(runs, lambda r: client.steps(r.id))
    ]

    def fetch(run_id: str, index: int) -> bytes | None:
        try:
            if index == FINAL:
                return client.final_screenshot(run_id)
            if index == VIDEO:
                return client.video(run_id)
            return client.screenshot(run_id, index)
        except ApiError:
            return None  # its picture is gone (artifact retention): the row stays

    if pictures:
        found = attach_pictures(found, fetch, budget=budget)
    return Report(batch, found, time.time())
