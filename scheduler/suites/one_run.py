"""One run's evidence on disk, as `goalfleet run` leaves it: the step pictures (secrets already
masked by the camera) and the run's result as JSON in one directory, and the same HTML report
a suite gets (`scheduler.suites.html`), made from a report of one case.

    camera = local_camera(settings)                   # pictures kept in memory for the run
    result = run_goal(device, goal, ..., camera=camera)
    keep_evidence(record, camera.store, directory, html=Path("r.html"))
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from scheduler.suites.html import to_html
from scheduler.suites.junit import write_pictures
from scheduler.suites.outcome import FINAL, VIDEO, Report, attach_pictures, cases
from workers.core.records import BatchRecord, RunRecord
from workers.core.shots import ArtifactKind, ArtifactStore

RESULT_FILE = "result.json"
"""The run's `RunResult` beside its pictures."""


def private_dir(path: Path) -> Path:
    """`path`, made if missing; the folders this makes are private to the user (0700)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for made in missing:
        made.chmod(0o700)  # mkdir's mode is masked by the umask; parents get 0777-umask
    return path


def one_run_report(record: RunRecord, store: ArtifactStore) -> Report:
    """A report of one case (the run), its pictures and video read from `store`."""
    steps = list(record.result.steps) if record.result is not None else []
    batch = BatchRecord(
        id=record.id,
        total=1,
        finished=1,
        counts={record.status.value: 1},
        created_at=record.submitted_at,
        goal=record.request.goal,
        runs=(record.id,),
    )
    by_index = {s.index: s.screenshot for s in steps}
    if record.result is not None and record.result.failure is not None:
        by_index[FINAL] = record.result.failure.final.screenshot
    if record.result is not None:
        by_index[VIDEO] = record.result.video

    def fetch(_run: str, index: int) -> bytes | None:
        artifact = by_index.get(index)
        kind: ArtifactKind = "webm" if index == VIDEO else "png"
        return None if artifact is None else store.get(artifact, kind)

    found = attach_pictures(cases([record], lambda _r: steps), fetch)
    return Report(batch, found, time.time())


def keep_evidence(
    record: RunRecord, store: ArtifactStore, directory: Path, *, html: Path | None = None
) -> Report:
    """The run's pictures, video and result into `directory` (made 0700), and its HTML report at
    `html` (linking the pictures in `directory`)."""
    private_dir(directory)
    report = one_run_report(record, store)
    write_pictures(report, directory)
    if record.result is not None:
        (directory / RESULT_FILE).write_text(record.result.model_dump_json(indent=2) + "\n")
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        rel = Path(os.path.relpath(directory.resolve(), html.resolve().parent)).as_posix()
        html.write_text(to_html(report, attachments=rel))
    return report
