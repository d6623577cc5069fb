"""The artifact store's retention: a picture lives as long as the last run that referenced it
is kept, and the scheduler's hourly prune deletes the rest."""

from __future__ import annotations

import os
import time
from pathlib import Path

from workers.fleet.artifacts import RUN_MARGIN_S, FileArtifacts, Retention

DAY = 86_400


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_picture_no_kept_run_refers_to_is_pruned_and_a_referenced_one_kept(tmp_path):
    store = FileArtifacts(tmp_path)
    old, shared, fresh = store.put(b"old screen"), store.put(b"shared"), store.put(b"fresh")
    for key in (old, shared):
        age(store.path(key), 30 * DAY)
    assert store.put(b"shared") == shared  # a run of today shows the same screen: touched
    dead_write = tmp_path / old[:2] / ".put-dead"
    dead_write.write_bytes(b"half")
    age(dead_write, 30 * DAY)
    pruned = store.prune(time.time() - 7 * DAY - RUN_MARGIN_S)
    assert (pruned.files, pruned.bytes, pruned.kept) == (1, len(b"old screen"), 2)
    assert store.get(old) is None
    assert store.get(shared) == b"shared"
    assert store.get(fresh) == b"fresh"
    assert not dead_write.exists()


def test_the_scheduler_prunes_hourly_by_the_runs_retention(tmp_path):
    now = [1_000_000_000.0]
    store = FileArtifacts(tmp_path)
    key = store.put(b"screen")
    os.utime(store.path(key), (now[0] - 3 * DAY, now[0] - 3 * DAY))
    week = Retention(store, retention_s=7 * DAY, clock=lambda: now[0])
    assert week.tick() is not None  # the first tick prunes (nothing: 3 days < 7 + 1)
    assert store.get(key) == b"screen"
    two_days = Retention(store, retention_s=2 * DAY - RUN_MARGIN_S + 1, clock=lambda: now[0])
    assert two_days.tick() is not None
    assert store.get(key) is None  # 3 days old, kept 2 days at most
    key = store.put(b"again")
    os.utime(store.path(key), (0, 0))
    assert two_days.tick() is None  # within the hour: not yet
    now[0] += 3600
    assert two_days.tick() is not None
    assert store.get(key) is None


def test_runs_kept_forever_keep_their_pictures(tmp_path):
    store = FileArtifacts(tmp_path)
    key = store.put(b"screen")
    os.utime(store.path(key), (0, 0))
    assert Retention(store, retention_s=0).tick() is None
    assert store.get(key) == b"screen"


def test_a_video_goes_with_its_run_as_pictures_do(tmp_path):
    store = FileArtifacts(tmp_path)
    old, fresh = store.put(b"old video", kind="webm"), store.put(b"fresh video", kind="webm")
    age(store.path(old, "webm"), 30 * DAY)
    pruned = store.prune(time.time() - 7 * DAY - RUN_MARGIN_S)
    assert (pruned.files, pruned.kept) == (1, 1)
    assert store.get(old, "webm") is None
    assert store.get(fresh, "webm") == b"fresh video"
    assert store.get(fresh) is None  # a video is not a picture
