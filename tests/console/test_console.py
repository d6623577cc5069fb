"""The web console in a real headless Chromium (Debian's `/usr/bin/chromium`, driven by
Playwright for Python; no browser is downloaded) against a real fleet: Redis, the API with the
console, the scheduler and two `goalfleet worker` processes on the sim `twins` app (an account
chooser no decider can settle: the run escalates to a person).

One scenario, in order, as a person would go through it: sign in; the fleet page shows a
device becoming busy during a run without a reload; the parked question is answered by
clicking its candidate and the run resumes to `done`; the next run, on the other device, passes
that screen from memory, shown as taught by that person; a hostile goal renders inert; a
read-only token sees the question but cannot answer it; no page logs a console error (a CSP
violation would). Each page's screenshot is saved (into docs/screenshots/ with
GOALFLEET_SAVE_DOC_PICTURE=1)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from console_kit import ALICE, CHROMIUM, HOSTILE, RUN, VIEWER
from playwright.sync_api import Browser, ConsoleMessage, Page, Route, expect, sync_playwright

from scheduler.client.api_client import FleetClient
from scheduler.local.fleet import LocalFleet
from workers.core.model import RunStatus

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[tuple[Page, list[str]]]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    errors: list[str] = []

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            errors.append(msg.text)

    def on_failure(resp: object) -> None:
        status = getattr(resp, "status", 0)
        if status >= 400:
            errors.append(f"{status} {getattr(resp, 'url', '')}")

    pg.on("console", on_console)
    pg.on("response", on_failure)
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg, errors
    context.close()


def shot(pg: Page, name: str, tmp_path: Path) -> None:
    target = DOCS if os.environ.get("GOALFLEET_SAVE_DOC_PICTURE") else tmp_path
    pg.screenshot(path=str(target / f"console-{name}.png"), full_page=True)


def sign_in(pg: Page, base: str, token: str, *, to: str = "/ui/fleet") -> None:
    pg.goto(base + to)
    expect(pg).to_have_url(f"{base}/ui/login?next={to}")
    pg.fill("#token", token)
    pg.click("#sign-in")
    expect(pg).to_have_url(base + to)


def wait_for(
    check: Callable[[], bool],
    what: str,
    timeout_s: float = 60.0,
    status: Callable[[], str] = lambda: "",
) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} ({status()})")
        time.sleep(0.1)


def test_a_person_watches_answers_and_the_fleet_learns(
    console_fleet: LocalFleet, page: tuple[Page, list[str]], tmp_path: Path
) -> None:
    pg, errors = page
    base = console_fleet.api_url
    alice = FleetClient(base, token=ALICE[1])

    sign_in(pg, base, ALICE[1])
    expect(pg.locator("#who")).to_have_text(ALICE[0])
    ios1 = pg.locator('tr[data-device="twin-1"] td.state')
    expect(ios1).to_have_text("idle")
    pg.evaluate("window.__same_page = true")

    run = alice.submit_run({**RUN, "device": "twin-1"})
    expect(ios1).to_have_text("running", timeout=30_000)  # live, without a reload
    assert pg.evaluate("window.__same_page") is True
    shot(pg, "fleet", tmp_path)
    wait_for(lambda: alice.run(run.id).status is RunStatus.AWAITING_ANSWER, "the question")

    pg.goto(base + "/ui/questions")
    link = pg.locator(f'a[href="/ui/questions/{run.id}"]')
    expect(link).to_be_visible()
    shot(pg, "questions", tmp_path)
    link.click()
    expect(pg.locator("img.question-shot")).to_be_visible()
    size = pg.evaluate("document.querySelector('img.question-shot').naturalWidth")
    assert size > 100  # the step's picture loaded
    shot(pg, "question", tmp_path)
    pg.click('button.candidate[value="Continue as ada"]')
    expect(pg).to_have_url(f"{base}/ui/runs/{run.id}")
    expect(pg.locator("#status")).to_have_text("done", timeout=30_000)
    shot(pg, "run", tmp_path)

    second = alice.submit_run({**RUN, "device": "twin-2"})
    assert alice.wait(second.id, timeout_s=60).status is RunStatus.DONE
    pg.goto(f"{base}/ui/runs/{second.id}")
    expect(pg.locator("td.decided-by", has_text=f"memory (taught by {ALICE[0]})")).to_have_count(1)

    hostile = alice.submit_run({**RUN, "goal": HOSTILE, "device": "twin-1"})
    pg.goto(f"{base}/ui/runs/{hostile.id}")
    expect(pg.locator("#goal")).to_have_text(HOSTILE)  # shown as text, not as markup
    assert pg.evaluate("window.__pwned === undefined")
    pg.goto(base + "/ui/runs")
    expect(pg.locator("td", has_text=HOSTILE).first).to_be_visible()
    assert pg.evaluate("window.__pwned === undefined")
    shot(pg, "runs", tmp_path)
    pg.goto(base + "/ui/memory")
    expect(pg.locator("td", has_text=f"human ({ALICE[0]})").first).to_be_visible()
    shot(pg, "memory", tmp_path)
    assert errors == []
    alice.close()


def test_a_read_only_token_sees_the_question_but_cannot_answer(
    console_fleet: LocalFleet, page: tuple[Page, list[str]]
) -> None:
    pg, errors = page
    base = console_fleet.api_url
    with FleetClient(base, token=ALICE[1]) as alice:
        run = alice.submit_run(
            {**RUN, "goal": "Sign in to review", "device": "twin-2"}
        )  # unlearned
        wait_for(
            lambda: alice.run(run.id).status is RunStatus.AWAITING_ANSWER,
            "the question",
            status=lambda: f"{alice.run(run.id).status}: {alice.run(run.id).reason}",
        )
    sign_in(pg, base, VIEWER[1], to=f"/ui/questions/{run.id}")
    expect(pg.locator("#read-only")).to_be_visible()
    assert pg.locator("button.candidate").count() == 0
    csrf = pg.locator('input[name="csrf"]').first.get_attribute("value")
    cookies = {c["name"]: c["value"] for c in pg.context.cookies()}
    forged = httpx.post(
        f"{base}/ui/questions/{run.id}/answer",
        data={"csrf": csrf or "", "target": "Continue as ada"},
        cookies=cookies,
    )
    assert forged.status_code == 403, forged.text
    without_csrf = httpx.post(
        f"{base}/ui/questions/{run.id}/answer", data={"csrf": "x", "target": "Continue as ada"},
        cookies=cookies,
    )  # fmt: skip
    assert without_csrf.status_code == 403
    with FleetClient(base, token=ALICE[1]) as alice:
        assert alice.run(run.id).status is RunStatus.AWAITING_ANSWER
    assert errors == []


def test_pages_need_a_session_and_carry_a_strict_csp(console_fleet: LocalFleet) -> None:
    base = console_fleet.api_url
    for path in ("/ui/fleet", "/ui/runs", "/ui/questions", "/ui/memory"):
        resp = httpx.get(base + path)
        assert resp.status_code == 303, path
        assert resp.headers["location"].startswith("/ui/login")
    assert httpx.get(base + "/ui/fleet/rows").status_code == 401
    login = httpx.get(base + "/ui/login")
    csp = login.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    bare = httpx.post(base + "/ui/login", data={"token": "not-a-token"})
    assert bare.status_code == 403  # no sign-in form was served to this client (login CSRF)
    with httpx.Client(base_url=base) as http:
        form = http.get("/ui/login").text
        csrf = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        bad = http.post("/ui/login", data={"token": "not-a-token", "csrf": csrf})
    assert bad.status_code == 401
    assert "goalfleet_console" not in bad.headers.get("set-cookie", "")
    forged = httpx.get(base + "/ui/fleet", cookies={"goalfleet_console": "alice.9999999999.x.00"})
    assert forged.status_code == 303


def test_the_api_docs_work_offline(console_fleet: LocalFleet) -> None:
    base = console_fleet.api_url
    html = httpx.get(base + "/docs").text
    assert "cdn" not in html.casefold()
    for asset in ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css"):
        assert httpx.get(base + asset).status_code == 200, asset


def test_the_docs_page_renders_with_nothing_but_the_api(
    console_fleet: LocalFleet, page: tuple[Page, list[str]], tmp_path: Path
) -> None:
    """In the browser, every request to anywhere but the API refused (an offline machine):
    Swagger UI still renders the API's operations."""
    pg, errors = page
    base = console_fleet.api_url
    elsewhere: list[str] = []

    def only_the_api(route: Route) -> None:
        if route.request.url.startswith(base):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    pg.route("**/*", only_the_api)
    pg.goto(base + "/docs")
    expect(pg.locator(".swagger-ui .info .title")).to_contain_text("goalfleet")
    expect(pg.locator(".opblock-summary-path", has_text="/v1/runs").first).to_be_visible()
    assert elsewhere == []
    assert errors == []
    shot(pg, "docs", tmp_path)


def test_signing_out_in_the_browser_ends_the_session_for_a_kept_cookie(
    console_fleet: LocalFleet, page: tuple[Page, list[str]]
) -> None:
    """The cookie as the browser holds it (HttpOnly, SameSite=Strict, not Secure over plain
    HTTP); copied before *Sign out*, it opens nothing after it."""
    pg, errors = page
    base = console_fleet.api_url
    sign_in(pg, base, VIEWER[1])
    cookie = next(c for c in pg.context.cookies() if c["name"] == "goalfleet_console")
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["secure"]) == (True, "Strict", False)
    kept = {"goalfleet_console": cookie["value"]}
    assert httpx.get(base + "/ui/fleet", cookies=kept).status_code == 200
    pg.click("text=Sign out")
    expect(pg).to_have_url(base + "/ui/login")
    assert httpx.get(base + "/ui/fleet", cookies=kept).status_code == 303
    assert errors == []


def test_another_sites_form_cannot_sign_the_browser_in(
    console_fleet: LocalFleet, page: tuple[Page, list[str]]
) -> None:
    """Login CSRF: a page on another site posts a token to the sign-in form; the browser
    marks the post cross-site and carries no sign-in cookie, so it is refused (403) and the
    browser stays signed out."""
    pg, errors = page
    base = console_fleet.api_url
    evil = (
        f'<form method="post" action="{base}/ui/login"><input name="token" value="{ALICE[1]}">'
        '<input name="next" value="/ui/fleet"><button id="go">go</button></form>'
    )
    pg.route(
        "http://evil.test/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=evil),
    )
    pg.goto("http://evil.test/")
    with pg.expect_response(f"{base}/ui/login") as answer:
        pg.click("#go")
    assert answer.value.status == 403
    expect(pg.locator("#error")).to_contain_text("another site")
    assert not any(c["name"] == "goalfleet_console" for c in pg.context.cookies())
    logged = "Failed to load resource: the server responded with a status of 403 (Forbidden)"
    refusal = [f"403 {base}/ui/login", logged]
    assert errors == refusal  # the refusal itself (the browser logs it too), nothing else


def test_a_blocked_runs_failure_report_on_its_page_in_status_and_the_api(
    console_fleet: LocalFleet, page: tuple[Page, list[str]], tmp_path: Path
) -> None:
    """A run with no password ends `blocked` on the password screen. Its page shows why: the
    final screen's picture (taken after the end), the rules decider's ranking, the refusal and
    the command that runs it again; `goalfleet status` prints the same, and the API serves
    the final picture to its owner."""
    from clikit import goalfleet  # noqa: PLC0415 - the one CLI check here

    pg, errors = page
    base = console_fleet.api_url
    alice = FleetClient(base, token=ALICE[1])
    no_password = {k: v for k, v in RUN.items() if k != "secrets"}
    run = alice.submit_run({**no_password, "device": "twin-1"})
    ended = alice.wait(run.id, timeout_s=60)
    assert ended.status is RunStatus.BLOCKED, ended.reason
    sign_in(pg, base, ALICE[1], to=f"/ui/runs/{run.id}")
    report = pg.locator("#failure")
    expect(report).to_be_visible()
    expect(report).to_contain_text("Ended on Enter your password")
    expect(report.locator("table.ranked")).to_contain_text("Sign in 0.97")
    expect(report.locator("table.refusals")).to_contain_text("no input named password")
    expect(pg.locator("#next-command")).to_contain_text("goalfleet submit --goal 'Sign in'")
    final = report.locator('img[alt="the final screen"]')
    expect(final).to_be_visible()
    assert final.evaluate("e => e.naturalWidth") > 100
    shot(pg, "failure", tmp_path)
    assert alice.final_screenshot(run.id).startswith(b"\x89PNG")
    env = {**os.environ, "GOALFLEET_API_URL": base, "GOALFLEET_API_TOKEN": ALICE[1]}
    status = goalfleet("status", run.id, env=env)
    assert status.returncode == 0, status.stderr
    assert "why it did not end done:" in status.stdout
    assert "ended on: 'Enter your password'" in status.stdout
    assert "no input named password was supplied" in status.stdout
    assert errors == []
    alice.close()
