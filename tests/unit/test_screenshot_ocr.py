"""No secret in any picture, proved by OCR (tesseract from Debian: `apt-get install
tesseract-ocr`): runs on the sim `privacy` app (a one-time code in a plain field, whose pixels
show the digits) and the `signin` app (a password in a secure field) store every step's
picture; tesseract reads each stored image and finds neither secret nor any 4+ character
fragment of one, while it does find the plain inputs (the phone, the email) on the screens
that show them, so the OCR can see typed text. With the mask off the same OCR finds the code:
the mask is what keeps it out."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from workers.core.loop import run_goal
from workers.core.model import Inputs, RunStatus
from workers.core.shots import FRAGMENT_CHARS, Camera, MemoryArtifacts
from workers.decide.rules import RulesDecider
from workers.devices.pictures import PillowPictures
from workers.devices.sim.apps import OTP_CODE
from workers.devices.sim.device import make_sim_device

pytestmark = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="needs tesseract (apt-get install tesseract-ocr)"
)

PHONE = "5551234567"
OTP = Inputs.of({"phone": PHONE}, {"code": OTP_CODE}, plain_fields=frozenset({"code"}))
EMAIL = "ada@example.com"
PASSWORD = "pw-of-ada-1"
SIGN_IN = Inputs.of({"email": EMAIL}, {"password": PASSWORD})


def ocr(png: bytes) -> str:
    out = subprocess.run(
        ["tesseract", "stdin", "stdout"], input=png, capture_output=True, check=True, timeout=60
    )
    return out.stdout.decode(errors="replace")


def squash(text: str) -> str:
    """OCR text without spaces and case: "2468 10" is still the code."""
    return re.sub(r"\s+", "", text).casefold()


def fragments(secret: str) -> set[str]:
    n = FRAGMENT_CHARS
    return {secret[i : i + n].casefold() for i in range(len(secret) - n + 1)} or {secret}


def pictures(app: str, inputs: Inputs, platform: str, *, mask: bool = True) -> list[str]:
    """The OCR text of every picture the run stored, in step order."""
    store = MemoryArtifacts()
    result = run_goal(
        make_sim_device(f"sim:{app}-{platform}"),
        "Sign in",
        decider=RulesDecider(),
        inputs=inputs,
        camera=Camera(store, PillowPictures(), mask=mask),
        sleep=lambda _: None,
    )
    assert result.status is RunStatus.DONE, result.reason
    ids = [r.screenshot for r in result.steps]
    assert all(ids), [r.screenshot_note for r in result.steps]
    assert len(store.blobs) == len(set(ids))
    return [ocr(store.blobs[i]) for i in ids if i is not None]


def found(texts: list[str], secret: str) -> list[str]:
    """Each fragment of `secret` some picture shows."""
    frags = fragments(secret)
    return sorted({f for t in texts for f in frags if f in squash(t)})


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_no_picture_shows_the_one_time_code_and_the_phone_is_readable(platform):
    texts = pictures("privacy", OTP, platform)
    assert found(texts, OTP_CODE) == []
    assert any(PHONE in squash(t) for t in texts), texts  # the OCR reads typed digits
    assert any("enterthecode" in squash(t) for t in texts), texts  # the code screen is there


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_no_picture_shows_the_password_and_the_email_is_readable(platform):
    texts = pictures("signin", SIGN_IN, platform)
    assert found(texts, PASSWORD) == []
    assert any(EMAIL in squash(t) for t in texts), texts
    assert any("enteryourpassword" in squash(t) for t in texts), texts


def test_with_the_mask_off_the_ocr_finds_the_code():
    """The control: the code's field shows its digits, so only the mask keeps them out."""
    texts = pictures("privacy", OTP, "ios", mask=False)
    assert found(texts, OTP_CODE) == sorted(fragments(OTP_CODE)), texts
