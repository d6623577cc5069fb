"""Step pictures drawn with Pillow: `draw_screen` renders a sim screen a person (and
tesseract) can read, `PillowPictures` is the `workers.core.shots.Pictures` seam: it paints
the secret bounds over, outlines the acted element and encodes a small palette PNG."""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from workers.core.shots import Rect, Screenshot

WIDTH = 480
PAD = 20
MASK_PAD = 3
"""Pixels the mask reaches beyond an element's bounds (antialiased edges)."""
MARK_PAD = 5
MARK = (220, 30, 30)
INK = (20, 20, 20)
GREY = (150, 150, 150)
BLUE = (20, 90, 200)
COLOURS = 64
"""Palette size of a stored picture: UI screens need few colours; a palette PNG is ~4x smaller."""
DOWNSCALE = 0.8
"""Each try that does not fit the byte cap shrinks the picture to this share."""
MAX_TRIES = 8

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@functools.cache
def _font(size: int) -> Font:
    return ImageFont.load_default(size=size)


@dataclass(frozen=True)
class Widget:
    """One element to draw: its ref, kind, label, the text it shows, and enabled state."""

    ref: str
    kind: str
    """field | secure | code | button | link | text | switch (the sim's element kinds)."""
    label: str
    shown: str = ""
    enabled: bool = True


def _height(w: Widget, *, first: bool) -> int:
    if w.kind in {"field", "secure", "code"}:
        return 86
    if w.kind == "button":
        return 60
    return 50 if first else 40


def draw_screen(widgets: Sequence[Widget]) -> Screenshot:
    """The screen as a PNG, with each widget's bounds by ref: drawn once per distinct screen
    (the same widgets draw the same pixels; a worker sees the same few screens run after run)."""
    return _drawn(tuple(widgets))


DRAWN_SCREENS = 256
"""Distinct screens a process keeps drawn (a few MB at most: a sim screen's PNG is ~10 kB)."""


@functools.lru_cache(maxsize=DRAWN_SCREENS)
def _drawn(widgets: tuple[Widget, ...]) -> Screenshot:
    heights = [_height(w, first=i == 0) for i, w in enumerate(widgets)]
    img = Image.new("RGB", (WIDTH, PAD * 2 + sum(h + 10 for h in heights)), "white")
    d = ImageDraw.Draw(img)
    bounds: dict[str, Rect] = {}
    y = PAD
    inner = WIDTH - 2 * PAD
    for i, (w, h) in enumerate(zip(widgets, heights, strict=True)):
        bounds[w.ref] = Rect(x=PAD, y=y, w=inner, h=h)
        _draw(d, w, y, inner, first=i == 0)
        y += h + 10
    buf = io.BytesIO()
    img.save(buf, "PNG", compress_level=1)
    return Screenshot(png=buf.getvalue(), width=img.width, height=img.height, bounds=bounds)


def _draw(d: ImageDraw.ImageDraw, w: Widget, y: int, inner: int, *, first: bool) -> None:
    ink = INK if w.enabled else GREY
    if w.kind in {"field", "secure", "code"}:
        d.text((PAD, y), w.label, fill=GREY if w.shown else ink, font=_font(18))
        d.rounded_rectangle((PAD, y + 28, PAD + inner, y + 84), 6, outline=GREY, width=2)
        text, colour = (w.shown, ink) if w.shown else (w.label, (185, 185, 185))
        d.text((PAD + 12, y + 40), text, fill=colour, font=_font(24))
    elif w.kind == "button":
        fill = BLUE if w.enabled else (215, 215, 215)
        d.rounded_rectangle((PAD, y, PAD + inner, y + 56), 10, fill=fill)
        colour = (255, 255, 255) if w.enabled else (120, 120, 120)
        label = w.label if w.enabled else f"{w.label} (disabled)"
        d.text((PAD + inner // 2, y + 28), label, fill=colour, font=_font(24), anchor="mm")
    elif w.kind == "link":
        d.text((PAD, y + 6), w.label, fill=BLUE, font=_font(22))
    elif w.kind == "switch":
        d.text((PAD, y + 6), w.label, fill=ink, font=_font(22))
        on = w.shown in {"1", "on", "true"}
        d.rounded_rectangle(
            (PAD + inner - 60, y + 4, PAD + inner, y + 34), 15, fill=(60, 170, 80) if on else GREY
        )
    else:
        d.text((PAD, y + 4), w.label, fill=ink, font=_font(30 if first else 22))


@dataclass(frozen=True)
class PillowPictures:
    """Mask, mark, palette-quantise and shrink until the PNG fits (`Pictures`)."""

    colours: int = COLOURS

    def finish(
        self, shot: Screenshot, *, mask: tuple[Rect, ...], mark: Rect | None, max_bytes: int
    ) -> bytes | None:
        with Image.open(io.BytesIO(shot.png)) as opened:
            img = opened.convert("RGB")
        sx, sy = img.width / shot.width, img.height / shot.height  # a Retina capture: 2x
        d = ImageDraw.Draw(img)
        for r in mask:
            box = _box(r, sx, sy, MASK_PAD)
            d.rectangle(box, fill=INK)
        if mark is not None:
            d.rectangle(_box(mark, sx, sy, MARK_PAD), outline=MARK, width=4)
        for _ in range(MAX_TRIES):
            data = _encode(img, self.colours)
            if len(data) <= max_bytes:
                return data
            size = (max(1, int(img.width * DOWNSCALE)), max(1, int(img.height * DOWNSCALE)))
            img = img.resize(size, Image.Resampling.BOX)  # box: fewer new colours than lanczos
        return None


def _box(r: Rect, sx: float, sy: float, pad: int) -> tuple[int, int, int, int]:
    return (
        int(r.x * sx) - pad,
        int(r.y * sy) - pad,
        int((r.x + r.w) * sx) + pad,
        int((r.y + r.h) * sy) + pad,
    )


def _encode(img: Image.Image, colours: int) -> bytes:
    """A palette PNG: the fast octree quantiser and zlib's default level, no `optimize` pass
    (median cut + optimize took ~13 ms a sim picture for ~15% fewer bytes: docs/benchmarks.md
    §11)."""
    buf = io.BytesIO()
    img.quantize(colours, method=Image.Quantize.FASTOCTREE).save(buf, "PNG")
    return buf.getvalue()
