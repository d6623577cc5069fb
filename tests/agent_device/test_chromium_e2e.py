"""A web sign-in page in Debian's Chromium over AT-SPI (issue 42, item 7): a plain HTML form
served on 127.0.0.1, Chromium (`--force-renderer-accessibility`, `ACCESSIBILITY_ENABLED=1`)
showing it in an app window at the screen's origin, driven end to end through `goalfleet run
--device agent-device:linux --decider rules`. The ground truth is what the server received
(the form's POST), not what we pressed. Chromium's own chrome is in the tree too (the address
bar, a row of unnamed toolbar buttons, "Close this view"): none of it may be pressed.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from ad_support import EMAIL, PASSWORD, acts_of, run_signin, wait_until_visible

from testing.linux_desktop import LinuxDesktop
from workers.devices.agent_device.daemon import DaemonProcess
from workers.processes import Child

FORM = b"""<!doctype html><html><head><title>Acme</title></head><body>
<h1>Sign in to Acme</h1>
<form method="post" action="/signin">
<label for="email">Email</label> <input id="email" name="email" type="email"><br>
<label for="pw">Password</label> <input id="pw" name="password" type="password"><br>
<button type="submit">Sign in</button>
</form></body></html>"""
WELCOME = (
    b"<!doctype html><html><head><title>Acme</title></head><body><h1>Welcome</h1></body></html>"
)


@dataclass
class Site:
    """The page's server: every sign-in POST it received, decoded."""

    url: str = ""
    posts: list[dict[str, list[str]]] = field(default_factory=list)


def _serve(site: Site) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._reply(FORM)

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(size).decode()
            site.posts.append(urllib.parse.parse_qs(body, keep_blank_values=True))
            self._reply(WELCOME)

        def _reply(self, page: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - its signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}/"
    return server


@pytest.fixture
def page(
    desktop: LinuxDesktop, daemon: DaemonProcess, tmp_path: Path
) -> Iterator[tuple[Site, Child]]:
    """The form in a Chromium app window at (0, 0) (agent-device adds a window's origin to
    extents twice for some toolkits; at the origin that is no offset), with a profile of its
    own and no keyring."""
    site = Site()
    server = _serve(site)
    argv = [
        *("chromium", "--no-sandbox", "--force-renderer-accessibility", "--no-first-run"),
        *("--disable-gpu", "--password-store=basic", f"--user-data-dir={tmp_path / 'profile'}"),
        *("--window-position=0,0", "--window-size=1200,760", f"--app={site.url}"),
    ]
    proc = desktop.start_app(argv, extra_env={"ACCESSIBILITY_ENABLED": "1"})
    try:
        wait_until_visible(daemon, label="Sign in", timeout_s=40)
        yield site, proc
    finally:
        proc.stop(grace_s=5)
        server.shutdown()
        server.server_close()


def test_a_web_form_in_chromium_signs_in_with_each_input_in_its_field(
    desktop: LinuxDesktop, page: tuple[Site, Child]
) -> None:
    """The e-mail into the Email entry, the password into the password entry, "Sign in"
    pressed once; the server received exactly those two values, once, and the run ends `done`
    on the page it answered with. Nothing of Chromium's chrome was pressed."""
    site, _ = page
    result, output = run_signin(
        desktop,
        *("--input", f"email={EMAIL}", "--secret", "password=env:GF_TEST_PW"),
        *("--done-when", "Welcome"),
    )
    assert result["status"] == "done", (result["status"], result["reason"])
    assert site.posts == [{"email": [EMAIL], "password": [PASSWORD]}]
    assert {a["input"] for a in acts_of(result, "fill")} == {"email", "password"}
    assert len(acts_of(result, "press")) == 1
    assert PASSWORD not in output


def test_a_web_form_without_the_password_is_not_submitted(
    desktop: LinuxDesktop, page: tuple[Site, Child]
) -> None:
    """No password supplied: `blocked` naming the field, nothing pressed, nothing posted."""
    site, _ = page
    result, _ = run_signin(desktop, "--input", f"email={EMAIL}", "--done-when", "Welcome")
    assert result["status"] == "blocked"
    assert result["reason"].startswith("this screen asks for 'Password'"), result["reason"]
    assert acts_of(result, "press") == []
    assert site.posts == []
