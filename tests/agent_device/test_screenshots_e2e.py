"""Step screenshots on the real stack: the GTK app driven through the agent-device daemon,
pictures taken by agent-device's own `screenshot` (ImageMagick `import` on the X display),
cropped to the app's window, masked and marked by the camera, and read back by tesseract.

The e-mail goes in as a secret typed into a plain field (as a one-time code would be): its
pixels are the app's, so only the mask keeps it out of a picture; the control run with the
mask off finds it, so the OCR can fail."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
from ad_support import EMAIL, PASSWORD
from PIL import Image

from workers.core.loop import run_goal
from workers.core.model import Inputs, RunStatus, StepRow
from workers.core.params import RunParams
from workers.core.shots import Camera, MemoryArtifacts
from workers.decide.scripted import ScriptedDecider, fill, press
from workers.devices.agent_device.device import AgentDeviceDevice
from workers.devices.pictures import MARK, PillowPictures

pytestmark = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="needs tesseract (scripts/setup-linux-target.sh)"
)

SECRET_EMAIL = Inputs.of(
    plain={}, secret={"email": EMAIL, "password": PASSWORD}, plain_fields=frozenset({"email"})
)
DOC_PICTURE = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def ocr(png: bytes) -> str:
    import subprocess  # noqa: PLC0415 - only here

    # tesseract reads small UI text better at twice the size
    image = Image.open(io.BytesIO(png)).convert("RGB")
    big = io.BytesIO()
    image.resize((image.width * 2, image.height * 2)).save(big, format="PNG")
    out = subprocess.run(
        ["tesseract", "stdin", "stdout"],
        input=big.getvalue(),
        capture_output=True,
        check=True,
        timeout=60,
    )
    return "".join(out.stdout.decode(errors="replace").split()).casefold()


def fragments(secret: str) -> set[str]:
    return {secret[i : i + 4].casefold() for i in range(len(secret) - 3)}


def signed_in(device: AgentDeviceDevice, *, mask: bool) -> tuple[list[StepRow], MemoryArtifacts]:
    store = MemoryArtifacts()
    decider = ScriptedDecider(
        [fill("Email", "email"), fill("Password", "password"), press("Sign in")]
    )
    result = run_goal(
        device,
        "Sign in",
        decider=decider,
        inputs=SECRET_EMAIL,
        params=RunParams(done_when="Welcome"),
        camera=Camera(store, PillowPictures(), mask=mask),
    )
    assert result.status is RunStatus.DONE, result.reason
    return result.steps, store


def red_pixels(png: bytes) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for px in image.getdata() if px == MARK)


def test_every_step_has_a_masked_marked_picture_of_the_app(device: AgentDeviceDevice) -> None:
    rows, store = signed_in(device, mask=True)
    ids = [r.screenshot for r in rows]
    assert all(ids), [r.screenshot_note for r in rows]
    assert all(r.screenshot_ms is not None and r.screenshot_ms > 0 for r in rows)
    shot_ms = sorted(r.screenshot_ms or 0.0 for r in rows)
    snap_ms = sorted(r.snapshot_ms for r in rows)
    print(f"screenshot ms {shot_ms} vs snapshot ms {snap_ms}")  # noqa: T201 - the figure
    pictures = [store.blobs[i] for i in ids if i is not None]
    for png in pictures:  # the app's window (360 x 280 on the 1280 x 800 display), not the display
        image = Image.open(io.BytesIO(png))
        assert image.format == "PNG"
        assert (image.width, image.height) == (360, 280), image.size
    texts = [ocr(png) for png in pictures]
    assert "signintocontinue" in texts[0], texts[0]
    assert "welcome" in texts[-1], texts[-1]
    for secret in (EMAIL, PASSWORD):
        shown = sorted({f for t in texts for f in fragments(secret) if f in t})
        assert shown == [], (secret == EMAIL, shown)
    acted = [png for row, png in zip(rows, pictures, strict=True) if row.action is not None]
    assert acted
    assert all(red_pixels(png) > 100 for png in acted)  # the acted element is outlined
    assert red_pixels(pictures[-1]) == 0  # the done step acted on nothing
    if os.environ.get("GOALFLEET_SAVE_DOC_PICTURE"):  # how docs/screenshots/ got its picture
        (DOC_PICTURE / "agent-device-linux-fill.png").write_bytes(pictures[1])


def test_with_the_mask_off_the_typed_secret_is_read(device: AgentDeviceDevice) -> None:
    """The control: the e-mail's field shows what was typed, so the OCR reads it."""
    rows, store = signed_in(device, mask=False)
    texts = [ocr(store.blobs[r.screenshot]) for r in rows if r.screenshot is not None]
    assert any(f in t for t in texts for f in fragments(EMAIL)), texts
