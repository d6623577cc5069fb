"""A report file opened as a person opens it: Debian's chromium through Playwright (no browser
download), offline (imported by name, as `browserkit`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"


@dataclass
class Opened:
    title: str
    texts: str
    """The page's visible text."""
    image_widths: list[int]
    """Each `<img>`'s decoded width (0: it did not decode)."""
    tables: int
    """Tables shown (visible)."""
    sections: int
    linked: list[str]
    """Each link's target resolved against the page (file:// for files beside it)."""
    errors: list[str] = field(default_factory=list)
    """Console errors, page errors and failed requests."""


def open_report(html: Path, *, shot: Path | None = None) -> Opened:
    """`html` in headless chromium, offline: what a person sees there (and, with `shot`, its
    first screenful as a PNG there)."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - the browser tests only

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no {CHROMIUM} (scripts/setup-browser.sh installs it)")
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900}, offline=True)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            if shot is not None:
                page.screenshot(path=str(shot), full_page=False)
            return Opened(
                title=page.title(),
                texts=page.inner_text("body"),
                tables=sum(1 for t in page.locator("table").all() if t.is_visible()),
                sections=page.locator("section").count(),
                image_widths=page.locator("img").evaluate_all(
                    "els => els.map(e => e.naturalWidth)"
                ),
                linked=page.locator("a[href]").evaluate_all("els => els.map(e => e.href)"),
                errors=errors,
            )
        finally:
            browser.close()
