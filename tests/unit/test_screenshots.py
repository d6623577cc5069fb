"""A picture of every step (`workers.core.shots`): the sim draws its screen, the loop keeps
one picture a step in a content-addressed store, marks the acted element, and a device that
takes none, a mode that is off, or a spent budget is a note in the row. Real sim, real
Pillow, real files; the in-memory store is the fake beside our `ArtifactStore` seam."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
from PIL import Image

from workers.core.loop import run_goal
from workers.core.model import Inputs, Outcome, RunStatus
from workers.core.ports import Device
from workers.core.shots import Camera, MemoryArtifacts, Rect, Screenshot, secret_refs
from workers.decide.rules import RulesDecider
from workers.devices.pictures import MARK, PillowPictures
from workers.devices.sim.device import SimDevice, make_sim_device
from workers.fleet.artifacts import FileArtifacts, make_camera
from workers.settings import Settings

SIGN_IN = Inputs.of({"email": "ada@example.com"}, {"password": "pw-of-ada-1"})


def signin(camera: Camera, app: str = "signin", inputs: Inputs = SIGN_IN):
    return run_goal(
        make_sim_device(f"sim:{app}-ios"),
        "Sign in",
        decider=RulesDecider(),
        inputs=inputs,
        camera=camera,
        sleep=lambda _: None,
    )


def test_every_step_has_a_picture_of_the_screen_its_decider_saw():
    store = MemoryArtifacts()
    result = signin(Camera(store, PillowPictures()))
    assert result.status is RunStatus.DONE
    assert len(result.steps) >= 4
    for row in result.steps:
        assert row.screenshot is not None, row
        assert row.screenshot_note == ""
        data = store.get(row.screenshot)
        assert data is not None
        with Image.open(io.BytesIO(data)) as img:
            assert img.format == "PNG"
            assert img.width >= 400


def test_the_acted_element_is_outlined_and_an_unacted_step_has_no_outline():
    store = MemoryArtifacts()
    result = signin(Camera(store, PillowPictures()))
    acted = next(r for r in result.steps if r.action is not None)
    last = result.steps[-1]
    assert last.action is None  # the done step acts on nothing

    def red(artifact: str) -> int:
        with Image.open(io.BytesIO(store.get(artifact) or b"")) as img:
            return sum(1 for px in img.convert("RGB").get_flattened_data() if px == MARK)

    assert red(acted.screenshot or "") > 100
    assert red(last.screenshot or "") == 0


def test_the_same_screens_in_many_runs_are_stored_once(tmp_path):
    store = FileArtifacts(tmp_path)
    camera = Camera(store, PillowPictures())
    runs = [signin(camera) for _ in range(5)]
    ids = {r.screenshot for run in runs for r in run.steps}
    files = list(tmp_path.rglob("*.png"))
    assert len(files) == len(ids) == len(runs[0].steps)
    for row in runs[0].steps:
        assert store.get(row.screenshot or "") == store.path(row.screenshot or "").read_bytes()


def test_a_file_store_refuses_a_path_that_is_not_an_artifact_id(tmp_path):
    store = FileArtifacts(tmp_path / "a")
    (tmp_path / "secret.png").write_bytes(b"x")
    assert store.get("../secret") is None
    with pytest.raises(ValueError, match="not an artifact id"):
        store.path("../../etc/passwd")


@dataclass
class NoCamera(Device):
    """A device port without `screenshot` (a device that takes no pictures)."""

    inner: SimDevice

    @property
    def platform(self):
        return self.inner.platform

    def snapshot(self):
        return self.inner.snapshot()

    def press(self, pinned_ref):
        return self.inner.press(pinned_ref)

    def fill(self, pinned_ref, value):
        return self.inner.fill(pinned_ref, value)

    def close(self):
        self.inner.close()


def test_a_device_without_screenshots_says_so_in_every_row():
    store = MemoryArtifacts()
    result = run_goal(
        NoCamera(make_sim_device("sim:signin-ios")),
        "Sign in",
        decider=RulesDecider(),
        inputs=SIGN_IN,
        camera=Camera(store, PillowPictures()),
    )
    assert result.status is RunStatus.DONE
    assert all(r.screenshot is None for r in result.steps)
    assert {r.screenshot_note for r in result.steps} == {"this device takes no screenshots"}
    assert store.blobs == {}


def test_failure_only_keeps_the_pictures_of_steps_that_did_not_advance():
    store = MemoryArtifacts()
    result = signin(Camera(store, PillowPictures(), mode="failure-only"), app="disabled")
    kept = [r for r in result.steps if r.screenshot is not None]
    assert all(r.outcome not in {Outcome.ACTED, Outcome.DONE} for r in kept)
    assert all(
        r.screenshot_note == "kept on failure only"
        for r in result.steps
        if r.outcome in {Outcome.ACTED, Outcome.DONE}
    )


def test_the_run_budget_drops_the_last_pictures_and_says_so():
    store = MemoryArtifacts()
    result = signin(Camera(store, PillowPictures(), run_budget_bytes=9_000))
    notes = [r.screenshot_note for r in result.steps if r.screenshot is None]
    assert notes, "a 9 kB budget holds fewer than every picture"
    assert all("budget" in n for n in notes)
    assert sum(len(b) for b in store.blobs.values()) <= 9_000


def test_a_picture_over_its_cap_is_downscaled_to_fit():
    shot = make_sim_device("sim:signin-ios").screenshot()
    full = PillowPictures().finish(shot, mask=(), mark=None, max_bytes=1_000_000) or b""
    small = PillowPictures().finish(shot, mask=(), mark=None, max_bytes=len(full) // 2) or b""
    assert 0 < len(small) <= len(full) // 2
    with Image.open(io.BytesIO(small)) as a, Image.open(io.BytesIO(full)) as b:
        assert a.width < b.width


def test_a_secret_shown_by_an_element_without_bounds_withholds_the_picture():
    @dataclass
    class NoBounds:
        inner: SimDevice

        def __getattr__(self, name):
            return getattr(self.inner, name)

        @property
        def platform(self):
            return self.inner.platform

        def screenshot(self) -> Screenshot:
            return self.inner.screenshot().model_copy(update={"bounds": {}})

    result = run_goal(
        NoBounds(make_sim_device("sim:signin-ios")),
        "Sign in",
        decider=RulesDecider(),
        inputs=SIGN_IN,
        camera=Camera(MemoryArtifacts(), PillowPictures()),
    )
    password = [r for r in result.steps if r.screen == "Enter your password"]
    assert any(r.screenshot_note.startswith("withheld:") for r in password), password
    assert all(r.screenshot is None for r in password)


def test_secret_refs_mask_secure_fields_dots_and_any_element_showing_a_fragment():
    dev = make_sim_device("sim:signin-ios")
    snap = dev.snapshot()
    inputs = Inputs.of({}, {"token": "Continue-xyz"})  # "Cont" is a fragment of the secret
    refs = secret_refs(snap, inputs)
    names = {n.ref: n.label for n in snap.nodes}
    assert [names[r] for r in refs] == ["Continue"]


def test_the_camera_is_built_from_settings(tmp_path):
    assert make_camera(Settings(screenshots="off")) is None
    camera = make_camera(
        Settings(artifact_dir=tmp_path, screenshots="failure-only", screenshot_max_bytes=5000)
    )
    assert camera is not None
    assert camera.mode == "failure-only"
    assert camera.picture_max_bytes == 5000
    assert isinstance(camera.store, FileArtifacts)
    assert camera.store.root == tmp_path


def test_rect_scale_of_a_retina_capture_masks_the_right_pixels():
    """A device whose PNG is 2x its bounds' points: the mask scales with it."""
    img = Image.new("RGB", (200, 100), "white")
    buf = io.BytesIO()
    img.save(buf, "PNG")
    shot = Screenshot(png=buf.getvalue(), width=100, height=50)
    out = PillowPictures().finish(
        shot, mask=(Rect(x=50, y=0, w=50, h=50),), mark=None, max_bytes=100_000
    )
    with Image.open(io.BytesIO(out or b"")) as done:
        rgb = done.convert("RGB")
        assert rgb.getpixel((150, 50)) != (255, 255, 255)
        assert rgb.getpixel((50, 50)) == (255, 255, 255)
