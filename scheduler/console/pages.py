"""The console's routes under `/ui`, server-rendered (Jinja2, every string escaped), served by
`goalfleet api` in the same process as the API:

    GET  /ui/login, POST /ui/login, POST /ui/logout     sign in with a named token
    GET  /ui/fleet              every device, its state, run, step and lease age (live)
    GET  /ui/runs               the runs list, with the filters of GET /v1/runs
    GET  /ui/runs/{id}          a run: status, reason, each step with its picture (live)
    GET  /ui/questions          waiting questions, oldest first
    GET  /ui/questions/{id}     a question: its picture, goal, history, each decider's answer;
    POST /ui/questions/{id}/answer   a candidate, done or blocked, as POST /v1/runs/{id}/answer
    GET  /ui/memory, POST /ui/memory/{key}/forget      the decision memory

Live parts poll a fragment route once a second (`static/console.js`) instead of server-sent
events: a page holds no connection open (nothing for `--processes N` or a proxy to pin), a
fragment is the same template the page renders, and a second of delay is nothing next to a
step's. Every response carries a Content-Security-Policy without inline script or style;
forms carry the session's CSRF token, and the cookie is SameSite=Strict (`Secure` over TLS).
Sessions live in Redis (`scheduler.console.session`): signing out ends one. The sign-in form
refuses another site's POST (403) and a client that gave too many wrong tokens (429,
`scheduler.api.throttle`, the count the API's bearer check keeps too).

Runs, their pictures and what an answer returns are the API's own answers (`ConsoleDeps.run`,
`.pictured`, `.answer`): a role is told no more here than the API tells it.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Annotated, Any
from urllib.parse import quote

import redis
from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from scheduler.api.bodies import BoundedRoute
from scheduler.api.throttle import AuthFailures, client_of
from scheduler.api.views import (
    need,
    shown_devices,
    shown_questions,
    shown_steps,
)
from scheduler.console.session import COOKIE, LOGIN_COOKIE, LOGIN_TTL_S, TTL_S, Session, Sessions
from scheduler.console.views import ago, device_row, step_view
from scheduler.errors import FleetError, NotFoundError
from scheduler.service.fleet import Fleet
from scheduler.store.listing import RunQuery
from scheduler.suites.failure import next_command
from workers.core.access import Action, Principal
from workers.core.journey import step_headings
from workers.core.memory import Remembered
from workers.core.model import RunStatus
from workers.core.records import Answer, RunRecord
from workers.fleet.artifacts import FileArtifacts
from workers.fleet.keys import Keys
from workers.fleet.memory_store import RedisMemory
from workers.fleet.state.questions import QuestionStore

HERE = FsPath(__file__).parent
STATIC = {
    "console.css": "text/css",
    "console.js": "text/javascript",
    "favicon.svg": "image/svg+xml",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
ARTIFACT = r"^[0-9a-f]{64}$"
MAX_DEVICES = 500
"""The fleet page shows this many devices at most (the first by id)."""


@dataclass(frozen=True)
class ConsoleDeps:
    fleet: Fleet
    questions: QuestionStore
    memory: RedisMemory
    pictures: FileArtifacts
    client: redis.Redis
    keys: Keys
    lease_s: float
    sessions: Sessions
    failures: AuthFailures
    """Wrong tokens counted per client (shared with the API's bearer check)."""
    cookie_secure: bool
    """Cookies are `Secure` on every request, not only those that came over TLS."""
    who: Callable[[str], Principal | None]
    """Who a token is, or None (the API's own token check)."""
    principals: Mapping[str, Principal]
    """Who a session's token name is now (a name whose token is gone signs in no more)."""
    resolve: Callable[[str], str]
    """A run id or unique prefix → the run id (404 otherwise)."""
    run: Callable[[Principal, str], RunRecord]
    """`GET /v1/runs/{id}`'s own question: (who, run id or prefix) → the run as `who` may
    see it (inputs hidden); 404 for a run `who` may not read, 403 without a read role."""
    pictured: Callable[[Principal, str], RunRecord]
    """The screenshot route's own question: (who, run id) → the run, when `who` may see its
    step pictures; 404 for a run `who` may not read, 403 for one whose pictures it may not."""
    answer: Callable[[str, Answer, Principal], RunRecord]
    """`POST /v1/runs/{id}/answer`'s own code: (run id, answer, who) → the run; refuses
    (403) a principal whose roles do not grant answering."""


class CsrfError(FleetError, code="CSRF", status=403):
    """A console form whose CSRF token is not its session's (another site's form)."""


SAME_SITE = ("same-origin", "none")
"""`Sec-Fetch-Site` values of a sign-in this console's own page sent (`none`: the person
typed it)."""


class SignIn(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The request has no valid session: the page sends the person to sign in."""


async def to_sign_in(request: Request, _: Exception) -> Response:
    """The app's handler of `SignIn` (a page to the sign-in form, a form or the rows a 401)."""
    if request.method == "GET" and not request.url.path.endswith("/rows"):
        target = quote(request.url.path, safe="/")
        return RedirectResponse(f"/ui/login?next={target}", status_code=303)
    return Response("sign in again", status_code=401, headers=SECURITY_HEADERS)


def console_router(deps: ConsoleDeps) -> APIRouter:  # noqa: C901, PLR0915 - the routes
    """The console's pages; the app installs `to_sign_in` as the handler of `SignIn`."""
    router = APIRouter(route_class=BoundedRoute)
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.globals["ago"] = ago

    def page(name: str, session: Session | None, status: int = 200, **ctx: Any) -> HTMLResponse:  # noqa: ANN401 - template values
        html = env.get_template(name).render(session=session, **ctx)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def signed_in(request: Request) -> Session:
        session = deps.sessions.read(_ascii(request.cookies.get(COOKIE)))
        if session is None or session.name not in deps.principals:
            raise SignIn
        return session

    def principal(session: Session) -> Principal:
        return deps.principals[session.name]

    def acting(request: Request, csrf: str, *actions: Action) -> Principal:
        """The form's principal, once its CSRF token is its session's and its roles grant
        one of `actions` (403 otherwise, as the API answers)."""
        session = signed_in(request)
        if not _same(csrf, session.csrf):
            raise CsrfError("the form's token does not match your session", hint="reload the page")
        who = principal(session)
        need(who, *actions)
        return who

    @router.get("/ui", include_in_schema=False)
    def home() -> Response:
        return RedirectResponse("/ui/fleet", status_code=303)

    @router.get("/ui/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name not in STATIC:
            return Response(status_code=404)
        body = (HERE / "static" / name).read_bytes()
        return Response(body, media_type=STATIC[name], headers={"Cache-Control": "max-age=300"})

    def set_cookie(
        resp: Response, request: Request, name: str, value: str, *, path: str, max_age: int
    ) -> None:
        """One of the console's cookies (`max_age` 0: gone): `HttpOnly`, `SameSite=Strict`,
        `Secure` over TLS (uvicorn takes the scheme from a trusted proxy's
        `X-Forwarded-Proto`) or always by the setting."""
        secure = deps.cookie_secure or request.url.scheme == "https"
        resp.set_cookie(
            name, value, max_age, path=path, httponly=True, samesite="strict", secure=secure
        )

    def login_page(
        request: Request, next_: str, status: int = 200, error: str = "", wait_s: int = 0
    ) -> HTMLResponse:
        """The sign-in form, with its CSRF token and the cookie it is bound to."""
        nonce = deps.sessions.login_nonce(request.cookies.get(LOGIN_COOKIE))
        csrf = deps.sessions.login_csrf(nonce)
        resp = page("login.html", None, status, next=_local(next_), error=error, csrf=csrf)
        if wait_s:
            resp.headers["Retry-After"] = str(wait_s)
        set_cookie(resp, request, LOGIN_COOKIE, nonce, path="/ui/login", max_age=LOGIN_TTL_S)
        return resp

    def too_many(request: Request, next_: str, wait_s: int) -> HTMLResponse:
        error = f"Too many failed sign-ins from your address: try again in {wait_s} s."
        return login_page(request, next_, 429, error, wait_s)

    @router.get("/ui/login", include_in_schema=False)
    def login_form(request: Request, next: str = "/ui/fleet") -> HTMLResponse:  # noqa: A002 - the query's name
        return login_page(request, next)

    @router.post("/ui/login", include_in_schema=False)
    def login(
        request: Request,
        token: Annotated[str, Form(max_length=500)],
        next: Annotated[str, Form(max_length=500)] = "/ui/fleet",  # noqa: A002 - the field
        csrf: Annotated[str | None, Form(max_length=200)] = None,
    ) -> Response:
        """Sign in: refused (403) from another site's form, or a form this browser was not
        served; 429 while the client is blocked; 401 for a wrong token (counted)."""
        if request.headers.get("sec-fetch-site", "none") not in SAME_SITE:
            error = "A sign-in sent from another site is refused: sign in on this page."
            return login_page(request, next, 403, error)
        if not deps.sessions.login_form_ok(request.cookies.get(LOGIN_COOKIE), csrf):
            error = "This sign-in form has expired or was not served to this browser: "
            return login_page(request, next, 403, error + "reload the sign-in page.")
        client = client_of(request.client.host if request.client else None)
        wait = deps.failures.blocked(client)
        if wait is not None:
            return too_many(request, next, wait)
        who = deps.who(token)
        if who is None:
            wait = deps.failures.failed(client, f"Bearer {token}")  # counted as the API does
            if wait is not None:
                return too_many(request, next, wait)
            return login_page(request, next, 401, "That token is not one of this API's.")
        cookie, _ = deps.sessions.open(who.name)
        resp = RedirectResponse(_local(next), status_code=303)
        set_cookie(resp, request, COOKIE, cookie, path="/ui", max_age=TTL_S)
        set_cookie(resp, request, LOGIN_COOKIE, "", path="/ui/login", max_age=0)  # spent
        return resp

    @router.post("/ui/logout", include_in_schema=False)
    def logout(request: Request, csrf: Annotated[str, Form(max_length=200)]) -> Response:
        """Sign out: the session ends for every API process (a copy of the cookie opens
        nothing after it)."""
        session = signed_in(request)
        if not _same(csrf, session.csrf):
            return Response(status_code=403)
        deps.sessions.end(session)
        resp = RedirectResponse("/ui/login", status_code=303)
        set_cookie(resp, request, COOKIE, "", path="/ui", max_age=0)
        return resp

    # -- the fleet ---------------------------------------------------------------------------

    def device_rows(who: Principal) -> list[Any]:
        need(who, Action.DEVICES)
        listed = sorted(deps.fleet.devices(), key=lambda d: d.info.id)[:MAX_DEVICES]
        devices = shown_devices(who, listed, deps.fleet.store.owners)
        busy = [d.run for d in devices if d.run]
        runs = {r.id: r for r in deps.fleet.store.load_many(busy)} if busy else {}
        with deps.client.pipeline(transaction=False) as p:
            for d in devices:
                p.pttl(deps.keys.lease(d.info.id))
            ttls = p.execute()
        rows = []
        for dev, ttl in zip(devices, ttls, strict=True):
            run = runs.get(dev.run or "")
            steps = (
                len(deps.fleet.steps(run.id))
                if run is not None and run.status is RunStatus.RUNNING
                else None
            )
            age = deps.lease_s - ttl / 1000 if isinstance(ttl, int) and ttl >= 0 else None
            rows.append(device_row(dev, run, steps, age))
        return rows

    @router.get("/ui/fleet", include_in_schema=False)
    def fleet_page(request: Request) -> HTMLResponse:
        session = signed_in(request)
        return page("fleet.html", session, devices=device_rows(principal(session)))

    @router.get("/ui/fleet/rows", include_in_schema=False)
    def fleet_rows(request: Request) -> HTMLResponse:
        session = signed_in(request)
        return page("fleet_rows.html", session, devices=device_rows(principal(session)))

    # -- runs --------------------------------------------------------------------------------

    @router.get("/ui/runs", include_in_schema=False)
    def runs_page(
        request: Request,
        *,
        status: Annotated[RunStatus | None, Query()] = None,
        device: Annotated[str | None, Query(max_length=200)] = None,
        batch: Annotated[str | None, Query(max_length=64)] = None,
        goal: Annotated[str | None, Query(max_length=500)] = None,
        cursor: Annotated[str | None, Query(max_length=100)] = None,
    ) -> HTMLResponse:
        session = signed_in(request)
        who = principal(session)
        need(who, Action.READ_OWN, Action.READ_ANY)
        q = RunQuery(
            status=status,
            device=device or None,
            batch=batch or None,
            goal=goal or None,
            limit=50,
            cursor=cursor,
            owner=None if who.sees_all else who.name,
        )
        result = deps.fleet.runs(q)
        filters = {
            "status": status.value if status else "",
            "device": device or "",
            "batch": batch or "",
            "goal": goal or "",
        }
        more = (
            {**{k: v for k, v in filters.items() if v}, "cursor": result.next}
            if result.next
            else None
        )
        return page(
            "runs.html",
            session,
            runs=result.runs,
            filters=filters,
            more=more,
            statuses=[s.value for s in RunStatus],
        )

    def run_parts(who: Principal, run_id: str) -> dict[str, Any]:
        run = deps.run(who, run_id)
        rows = shown_steps(who, run, deps.fleet.steps(run.id))
        headings = step_headings(run.result, rows)  # a journey's rows under their steps
        keys = {r.memory.entry for r in rows if r.memory is not None}
        taught: dict[str, Remembered] = {}
        for key in keys:
            entry = deps.memory.get(key)
            if entry is not None:
                taught[key] = entry
        failure = run.result.failure if run.result is not None else None
        return {
            "run": run,
            "steps": [step_view(r, taught, headings.get(r.index, "")) for r in rows],
            "pictures": may_see_pictures(who, run),
            "failure": failure,
            "next_command": next_command(run) if failure is not None else "",
        }

    @router.get("/ui/runs/{run_id}", include_in_schema=False)
    def run_page(request: Request, run_id: str) -> HTMLResponse:
        session = signed_in(request)
        return page("run.html", session, **run_parts(principal(session), run_id))

    @router.get("/ui/runs/{run_id}/rows", include_in_schema=False)
    def run_rows(request: Request, run_id: str) -> HTMLResponse:
        session = signed_in(request)
        parts = run_parts(principal(session), run_id)
        resp = page("run_rows.html", session, **parts)
        if parts["run"].status.terminal:
            resp.headers["X-Live"] = "done"  # the script stops polling
        return resp

    def may_see_pictures(who: Principal, run: RunRecord) -> bool:
        """`Principal.may_see_pictures` for `run` (as the API's screenshot route answers)."""
        return who.may_see_pictures(run.owner, waiting=run.status is RunStatus.AWAITING_ANSWER)

    @router.get("/ui/runs/{run_id}/pictures/{artifact}", include_in_schema=False)
    def picture(
        request: Request, run_id: str, artifact: Annotated[str, Path(pattern=ARTIFACT)]
    ) -> Response:
        """A step's picture by its artifact id, as the run's rows name it, through the run:
        served when `who` may see that run's pictures (the API's screenshot route's question)
        and a step of the run showed it (a row since written anew, the run claimed again,
        included: a page drawn before still shows it); another run's picture, or none, is
        not found."""
        who = principal(signed_in(request))
        run = deps.pictured(who, run_id)
        failure = run.result.failure if run.result is not None else None
        final = failure.final.screenshot if failure is not None else None
        if artifact != final and not deps.fleet.showed(run.id, artifact):
            raise NotFoundError(f"run {run.id!r} has no step picture {artifact!r}")
        data = deps.pictures.get(artifact)
        if data is None:
            raise NotFoundError(f"the picture {artifact!r} is no longer kept")
        cache = {"Cache-Control": "private, max-age=86400, immutable"}
        return Response(data, media_type="image/png", headers=cache)

    @router.get("/ui/runs/{run_id}/video", include_in_schema=False)
    def video(request: Request, run_id: str) -> Response:
        """The run's video (WebM), served when `who` may see that run's pictures (the API's
        video route's question)."""
        who = principal(signed_in(request))
        run = deps.pictured(who, run_id)
        artifact = run.result.video if run.result is not None else None
        data = deps.pictures.get(artifact, "webm") if artifact is not None else None
        if data is None:
            raise NotFoundError(f"run {run.id!r} has no video (kept)")
        cache = {"Cache-Control": "private, max-age=86400, immutable"}
        return Response(data, media_type="video/webm", headers=cache)

    # -- questions ---------------------------------------------------------------------------

    @router.get("/ui/questions", include_in_schema=False)
    def questions_page(request: Request) -> HTMLResponse:
        session = signed_in(request)
        shown = shown_questions(principal(session), deps.questions.open(), deps.fleet.store.owners)
        return page("questions.html", session, questions=sorted(shown, key=lambda q: q.asked_at))

    @router.get("/ui/questions/{run_id}", include_in_schema=False)
    def question_page(request: Request, run_id: str) -> HTMLResponse:
        """An open question, for whoever `GET /v1/questions` lists it to; else the run as
        `GET /v1/runs/{id}` answers (an answerer, who reads no runs, learns nothing of a run
        that waits for no answer)."""
        session = signed_in(request)
        who = principal(session)
        question = (
            deps.questions.get(deps.resolve(run_id)) if who.may(Action.QUESTIONS_ANY) else None
        )
        if question is None:
            run = deps.run(who, run_id)
            question = deps.questions.get(run.id)
        else:
            run = deps.fleet.run(question.run_id)
        if question is None:
            return page("answered.html", session, run=run)
        rows = deps.fleet.steps(run.id)
        shot = next((r.screenshot for r in reversed(rows) if r.screenshot), None)
        return page(
            "question.html",
            session,
            q=question,
            shot=shot if may_see_pictures(who, run) else None,
            may_answer=who.may(Action.ANSWER),
        )

    @router.post("/ui/questions/{run_id}/answer", include_in_schema=False)
    def answer(
        request: Request,
        run_id: str,
        *,
        csrf: Annotated[str, Form(max_length=200)],
        target: Annotated[str | None, Form(max_length=200)] = None,
        done: Annotated[str | None, Form(max_length=10)] = None,
        blocked: Annotated[str | None, Form(max_length=10)] = None,
    ) -> Response:
        who = acting(request, csrf, Action.ANSWER)
        body = Answer(target=target or None, done=bool(done), blocked=bool(blocked))
        run = deps.answer(run_id, body, who)
        # the run's page, for whoever may read it; an answerer goes back to the questions
        after = f"/ui/runs/{run.id}" if who.may_read(run.owner) else "/ui/questions"
        return RedirectResponse(after, status_code=303)

    # -- memory ------------------------------------------------------------------------------

    @router.get("/ui/memory", include_in_schema=False)
    def memory_page(
        request: Request, goal: Annotated[str | None, Query(max_length=500)] = None
    ) -> HTMLResponse:
        session = signed_in(request)
        who = principal(session)
        need(who, Action.MEMORY_READ)
        return page(
            "memory.html",
            session,
            entries=deps.memory.entries(goal=goal or None),
            goal=goal or "",
            may_forget=who.may(Action.MEMORY_FORGET),
        )

    @router.post("/ui/memory/{key}/forget", include_in_schema=False)
    def forget(
        request: Request,
        key: Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")],
        csrf: Annotated[str, Form(max_length=200)],
    ) -> Response:
        acting(request, csrf, Action.MEMORY_FORGET)
        deps.memory.forget(key)
        return RedirectResponse("/ui/memory", status_code=303)

    return router


def _local(path: str) -> str:
    """A redirect target inside the console, never another site's."""
    return path if path.startswith("/ui/") and not path.startswith("//") else "/ui/fleet"


def _ascii(value: str | None) -> str | None:
    """A cookie's value as sent, or None when it is not ASCII (no cookie we issue is: a
    forged one is no session, not a 500 from comparing it)."""
    return value if value is None or value.isascii() else None


def _same(given: str, expected: str) -> bool:
    """A form's CSRF field is `expected`, compared in constant time as UTF-8 bytes (a field
    of any characters is a mismatch, never a TypeError)."""
    return hmac.compare_digest(given.encode(), expected.encode())
