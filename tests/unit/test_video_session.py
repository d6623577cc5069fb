"""The run's video policy (`workers.core.video`) at its seams: a recording and the films are
fakes of our own; the boxes it paints are what is checked (the real ffmpeg painting and the OCR
of its frames: tests/agent_device/test_video_e2e.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.core.model import Inputs, Node, RunStatus
from workers.core.projection import build_snapshot
from workers.core.shots import MemoryArtifacts, Rect
from workers.core.video import Box, Clip, NoVideoError, Recording, Videographer, VideoSession

SECRET = "s3cret-code-991"
INPUTS = Inputs.of(plain={"email": "ada@example.com"}, secret={"code": SECRET})


class Films:
    def __init__(self) -> None:
        self.boxes: tuple[Box, ...] = ()

    def finish(self, clip: Clip, boxes: tuple[Box, ...], *, max_bytes: int) -> bytes | None:
        self.boxes = boxes
        data = b"\x1a\x45\xdf\xa3 webm"
        return data if len(data) <= max_bytes else None


class Filmed:
    """A device whose recording starts at screen point (100, 50)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.discarded = 0

    def record(self) -> Recording:
        device = self

        class _Rec:
            origin = (100, 50)

            def stop(self) -> Clip:
                return Clip(path=device.tmp / "c.webm", mime="video/webm", width=360, height=280)

            def discard(self) -> None:
                device.discarded += 1

        return _Rec()


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def screen(*nodes: Node) -> object:
    return build_snapshot(list(nodes), "1")


FIELD = Node(ref="@e1", type="TextField", label="Code", rect=(110, 60, 200, 30))
TYPED = FIELD.model_copy(update={"value": "•" * 8})
OTHER = Node(ref="@e1", type="Button", label="Done", rect=(110, 60, 80, 30))


def session(tmp: Path, **over: object) -> tuple[VideoSession, Films, MemoryArtifacts, Clock]:
    films, store, clock = Films(), MemoryArtifacts(), Clock()
    camera = Videographer(store, films, **over)  # type: ignore[arg-type]
    return camera.session(Filmed(tmp), INPUTS, clock), films, store, clock


def test_a_secret_field_is_painted_from_before_its_fill_until_after_it_left(tmp_path: Path):
    s, films, store, clock = session(tmp_path)
    s.start()
    clock.t = 102.0
    s.seen(screen(FIELD))  # t=2: nothing secret yet
    s.filling(screen(FIELD), "@e1")  # t=2: the fill starts
    clock.t = 103.0
    s.seen(screen(TYPED))  # t=3: the field holds it
    clock.t = 105.0
    s.seen(screen(OTHER))  # t=5: the field left
    video, note = s.finish(RunStatus.DONE)
    assert note == ""
    assert video is not None
    assert store.blobs[video].startswith(b"\x1a\x45\xdf\xa3")
    inside = Rect(x=10, y=10, w=200, h=30)  # moved to the recording's origin
    assert films.boxes == (Box(rect=inside, start=1.0, end=6.0),)


def test_a_field_still_on_screen_is_painted_until_the_end(tmp_path: Path):
    s, films, _, clock = session(tmp_path)
    s.start()
    clock.t = 101.5
    s.filling(screen(FIELD), "@e1")
    clock.t = 104.0
    s.seen(screen(TYPED))
    clock.t = 107.0
    s.finish(RunStatus.BLOCKED)
    assert [(b.start, b.end) for b in films.boxes] == [(0.5, 8.0)]


def test_a_secret_without_bounds_withholds_the_video(tmp_path: Path):
    s, _, store, _ = session(tmp_path)
    s.start()
    s.filling(screen(FIELD.model_copy(update={"rect": None})), "@e1")
    video, note = s.finish(RunStatus.DONE)
    assert video is None
    assert note == "withheld: @e1 shows a secret and the device gave no bounds"
    assert store.puts == 0


@pytest.mark.parametrize(
    ("mode", "status", "kept", "note"),
    [
        ("on", RunStatus.DONE, True, ""),
        ("failure-only", RunStatus.DONE, False, "kept on failure only"),
        ("failure-only", RunStatus.BLOCKED, True, ""),
        ("off", RunStatus.BLOCKED, False, "video is off"),
    ],
)
def test_the_mode_says_which_runs_keep_one(tmp_path: Path, mode, status, kept, note):
    s, _, _, _ = session(tmp_path, mode=mode)
    s.start()
    video, why = s.finish(status)
    assert (video is not None, why) == (kept, note)
    assert s.device.discarded == (0 if mode == "off" else 1)  # type: ignore[attr-defined]


def test_a_video_over_its_cap_is_not_stored(tmp_path: Path):
    s, _, store, _ = session(tmp_path, max_bytes=3)
    s.start()
    assert s.finish(RunStatus.DONE) == (None, "the run's video is over its cap (3 B)")
    assert store.puts == 0


def test_a_device_that_records_nothing_says_so(tmp_path: Path):
    class Still:
        def record(self) -> Recording:
            raise NoVideoError

    s = Videographer(MemoryArtifacts(), Films()).session(Still(), INPUTS, Clock())
    s.start()
    assert s.finish(RunStatus.DONE) == (None, "this device records no video")


def test_a_run_that_raises_leaves_no_recorder_running(tmp_path: Path):
    """The loop's caller sees the error; the recording is discarded, nothing stored."""
    from workers.core.loop import run_goal  # noqa: PLC0415
    from workers.devices.sim.device import make_sim_device  # noqa: PLC0415

    class Broken:
        def decide(self, state: object) -> object:
            raise RuntimeError("a decider bug")

    filmed = Filmed(tmp_path)
    sim = make_sim_device("sim:signin-ios")
    sim.record = filmed.record  # type: ignore[method-assign]
    store = MemoryArtifacts()
    with pytest.raises(RuntimeError, match="a decider bug"):
        run_goal(sim, "Sign in", decider=Broken(), video=Videographer(store, Films()))  # type: ignore[arg-type]
    assert filmed.discarded == 1
    assert store.puts == 0
