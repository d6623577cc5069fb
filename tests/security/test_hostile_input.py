"""Crafted input on every route of the API and the console, as several roles (issue 44): ids
that end in another key's suffix (`<id>:steps`), JSON nested a thousand deep, non-ASCII CSRF
fields and cookie signatures, bytes that are not UTF-8. Each is a one-line 4xx; nothing is
written; nothing is logged as an error (the app's own 500 log line, with its traceback).

The probe walks the routes the app serves (enumerated from its route list, so a new route is
probed without a word here), in process on a real Redis, with things `alice` owns to aim at
(`rolekit`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from redis_values import redis_values
from rolekit import CONSOLE_COOKIE, World, auth, sign_in, world
from structlog.testing import capture_logs

from scheduler.api.errors import RETRY_AFTER_S
from scheduler.local.redis import LocalRedis

DEEP = "[" * 1000 + "]" * 1000
"""JSON 1,000 arrays deep (2 KB): a recursive parser's stack, not the body cap, gives out."""
DEEP_BODIES = (
    DEEP,
    '{"goal": ' + DEEP + "}",
    '{"goal": "Sign in", "inputs": ' + '{"a": ' * 1000 + "1" + "}" * 1001,
    '{"blocked": true, "target": ' + DEEP + "}",
)
ROLES = ("reader", "alice", "bob", "answerer", "ops", "erin")
NON_ASCII = "é\u202e\u200b"


def hostile_ids(real: str) -> list[str]:
    """Path values for an id: another key's suffix on a real id and an unknown one, key
    globs and separators, traversal, control and non-ASCII characters, a long one."""
    return [
        f"{real}:steps",
        f"{real}:runs",
        f"{'0' * 32}:steps",
        f"{real[:8]}*",
        "*",
        ":",
        "../../etc/passwd",
        "\x00",
        NON_ASCII,
        "x" * 600,
    ]


@pytest.fixture(scope="module")
def hw(sec_redis: LocalRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with world(sec_redis.url, "gfhostile", tmp_path_factory.mktemp("hostile")) as w:
        yield w


def _keys(w: World) -> dict[bytes, list[bytes]]:
    """Every key of the fleet and what it holds (read by type, in an order that does not
    depend on how Redis stores it), to see that nothing changed."""
    held = redis_values(w.db, match=f"{w.settings.key_prefix}:*")
    return {key: sorted(values) for key, values in held.items()}


def _routes(w: World) -> list[tuple[str, str]]:
    """Every (method, path template) the app serves, HEAD aside."""
    routes = w.client.app.router.routes  # type: ignore[attr-defined]
    return [
        (method, route.path)
        for route in routes
        for method in sorted(getattr(route, "methods", None) or ())
        if method != "HEAD"
    ]


Case = tuple[str, str, str, dict[str, object]]
"""A probe's request: (route template, method, path, what else httpx is given)."""


def _path(template: str, values: dict[str, str], hostile: tuple[str, str] | None = None) -> str:
    """`template` filled with `values`, one parameter's value replaced when `hostile`."""
    filled = dict(values)
    if hostile is not None and "{" + hostile[0] + "}" in template:
        filled[hostile[0]] = hostile[1]
    return template.format(**{k: quote(v, safe="") for k, v in filled.items()})


def _cases(
    routes: list[tuple[str, str]], values: dict[str, str], creds: list[dict[str, str]], csrf: str
) -> Iterator[Case]:
    """For each route, as each of `creds`: every query parameter any route reads, hostile
    at once; every path parameter hostile in turn; a write
    route also gets deep JSON bodies, and a console form hostile forms (a CSRF field near
    `csrf`)."""
    forms = [
        {"csrf": NON_ASCII, "target": NON_ASCII, "token": NON_ASCII, "blocked": "1"},
        {"csrf": csrf[:-1] + "é", "next": "//evil.example/" + NON_ASCII},
    ]
    raw_forms = [b"csrf=%FF%FE%00&target=\xff\xfe&token=%C3", b"csrf&&==&target=%"]
    json_type = {"Content-Type": "application/json"}
    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    query = {
        "batch": f"{values['batch_id']}:runs",
        "device": "a:b*",
        "schedule": "*",
        "goal": NON_ASCII * 100,
        "cursor": "0@1e309",
        "since": "-1e309",
        "until": "nan",
        "limit": str(10**12),
        "status": NON_ASCII,
        "all": "maybe",
        "after": "-1",
        "bucket": NON_ASCII,
        "min_runs": "-5",
        "next": "//evil.example/",
    }
    for method, template in routes:
        path = _path(template, values)
        for headers in creds:
            if method == "GET" or template == "/v1/memory":  # the routes that read a query
                yield template, method, path, {"headers": headers, "params": query}
            for param in (p for p in values if "{" + p + "}" in template):
                for bad in hostile_ids(values[param]):
                    yield (
                        template,
                        method,
                        _path(template, values, (param, bad)),
                        {"headers": headers},
                    )
            if method not in {"POST", "DELETE"}:
                continue
            as_json, as_form = {**headers, **json_type}, {**headers, **form_type}
            yield from ((template, method, path, {"content": b, "headers": as_json})
                        for b in DEEP_BODIES)  # fmt: skip
            if template.startswith("/ui"):  # forms are the console's (to another route,
                # a form would cancel or delete as asked: no hostile request)
                yield from ((template, method, path, {"data": f, "headers": headers})
                            for f in forms)  # fmt: skip
                yield from ((template, method, path, {"content": r, "headers": as_form})
                            for r in raw_forms)  # fmt: skip


def _odd_cookies(good: str) -> list[bytes]:
    """Cookie headers a browser would not send: non-ASCII signatures, bytes that are not
    UTF-8, a cookie of separators, a quote left open."""
    return [
        f"{CONSOLE_COOKIE}=alice.9999999999.x.{'é' * 64}".encode("latin-1"),
        f"{CONSOLE_COOKIE}={good[:-1]}\xe9".encode("latin-1"),
        f"{CONSOLE_COOKIE}=é.é.é.é".encode("latin-1"),
        f"{CONSOLE_COOKIE}={'.' * 3000}".encode(),
        f"{CONSOLE_COOKIE}=\xff\xfe; {CONSOLE_COOKIE}=x".encode("latin-1"),
        b'goalfleet_console="unterminated',
    ]


def test_the_probe_walks_every_route_and_none_answers_5xx(hw: World) -> None:
    """Every route, each path parameter hostile in turn, hostile JSON and form bodies, odd
    cookies, as no one and as each role (bearer token and console session at once): no
    response is 5xx, nothing is written, nothing is logged as an error."""
    w = hw
    o = w.owned()
    signed = {who: sign_in(w.client, who) for who in ROLES}
    client = TestClient(w.client.app, raise_server_exceptions=False)
    values = {
        "run_id": o.run,
        "batch_id": o.batch,
        "schedule_id": o.schedule,
        "key": o.memory,
        "index": "1",
        "name": "console.js",
        "artifact": o.picture,
    }
    creds = [{}] + [
        {**auth(who), "Cookie": f"{CONSOLE_COOKIE}={signed[who].cookie}"} for who in ROLES
    ]
    routes = _routes(w)
    cases = list(_cases(routes, values, creds, signed["alice"].csrf))
    cases.extend(
        (template, method, _path(template, values), {"headers": {"Cookie": cookie}})
        for method, template in routes
        for cookie in _odd_cookies(signed["alice"].cookie)
    )
    before = _keys(w)
    seen: dict[str, set[int]] = {}
    failures: list[str] = []
    failing: Counter[str] = Counter()
    with capture_logs() as logs:
        for template, method, path, kw in cases:
            resp = client.request(method, path, follow_redirects=False, **kw)  # type: ignore[arg-type]
            seen.setdefault(f"{method} {template}", set()).add(resp.status_code)
            if resp.status_code >= 500:
                failures.append(f"{method} {path[:100]!r} {kw!r:.120}: {resp.text[:160]}")
                failing[f"{method} {template}"] += 1
    errors = [e for e in logs if e.get("log_level") in {"error", "critical"}]
    assert failures == [], f"{len(failures)} of {len(cases)} >= 500 ({dict(failing)}), e.g.:\n" + (
        "\n".join(failures[:15])
    )
    assert errors == [], errors[:3]
    assert {f"{m} {t}" for m, t in routes} <= set(seen)  # every route probed
    assert sum(1 for k in seen if k.split(" ")[1].startswith("/ui")) >= 15
    assert _keys(w) == before


API_ROUTES = (
    ("GET", "/v1/runs/{}"),
    ("GET", "/v1/runs/{}/steps"),
    ("GET", "/v1/runs/{}/steps/1/screenshot"),
    ("POST", "/v1/runs/{}/cancel"),
    ("POST", "/v1/runs/{}/answer"),
    ("GET", "/v1/batches/{}"),
    ("GET", "/v1/batches/{}/runs"),
)
CONSOLE_ROUTES = (
    ("GET", "/ui/runs/{}"),
    ("GET", "/ui/runs/{}/rows"),
    ("GET", "/ui/questions/{}"),
    ("GET", "/ui/runs/{}/pictures/" + "0" * 64),
)


@pytest.mark.parametrize("suffix", [":steps", ":runs"])
def test_an_id_with_another_keys_suffix_is_unknown_whoever_owns_it(hw: World, suffix: str) -> None:
    """`<id>:steps` names no run: a 404, the same for bob whether the id is alice's real run
    (or batch) or no run at all, on every API and console route that takes an id."""
    w, c = hw, hw.client
    o = w.owned()
    bob = sign_in(c, "bob")
    before = _keys(w)
    for method, route in API_ROUTES + CONSOLE_ROUTES:
        real = o.batch if "batches" in route else o.run
        answers = []
        for rid in (real, "0" * 32):
            headers = bob.headers if route.startswith("/ui") else auth("bob")
            body = {"blocked": True} if route.endswith("answer") else None
            resp = c.request(method, route.format(rid + suffix), json=body, headers=headers)
            assert resp.status_code < 500, (method, route, resp.text)
            answers.append((resp.status_code, resp.text.replace(rid, "<id>")))
        assert answers[0] == answers[1], (method, route, answers)
        assert answers[0][0] in {403, 404}, (method, route, answers)
    ops = c.get(f"/v1/runs/{o.run}{suffix}", headers=auth("ops"))
    assert ops.status_code == 404, ops.text
    assert "32 hex" in ops.json()["fix"]
    assert _keys(w) == before


@pytest.mark.parametrize("body", DEEP_BODIES)
@pytest.mark.parametrize("route", ["/v1/runs", "/v1/batches", "/v1/schedules", "answer"])
def test_json_nested_deep_is_refused_before_it_is_parsed(hw: World, body: str, route: str) -> None:
    """A JSON body nested past the bound (32 levels) is a one-line 4xx naming the body, for
    every JSON route; nothing is written, nothing logged as an error."""
    w = hw
    path = f"/v1/runs/{w.parked()}/answer" if route == "answer" else route
    client = TestClient(w.client.app, raise_server_exceptions=False)
    before = _keys(w)
    with capture_logs() as logs:
        resp = client.post(
            path, content=body, headers={**auth("ops"), "Content-Type": "application/json"}
        )
    assert resp.status_code == 422, resp.text
    problem = resp.json()
    assert problem["problems"][0]["field"] == "body", problem
    assert "32" in problem["message"], problem
    assert "\n" not in problem["message"]
    assert [e for e in logs if e.get("log_level") == "error"] == []
    assert _keys(w) == before


@pytest.mark.parametrize(("levels", "refused"), [(32, False), (33, True)])
def test_the_depth_bound_is_exact(hw: World, levels: int, refused: bool) -> None:  # noqa: FBT001
    """An object holding arrays 32 levels deep in all is read (the model then refuses its
    unknown field); 33 is refused for its depth, naming the body."""
    arrays = levels - 1  # inside the top-level object
    raw = '{"goal": "Sign in [{", "x": ' + "[" * arrays + "]" * arrays + "}"
    resp = hw.client.post(
        "/v1/runs", content=raw, headers={**auth("ops"), "Content-Type": "application/json"}
    )
    assert resp.status_code == 422, resp.text
    field = resp.json()["problems"][0]["field"]
    assert field == ("body" if refused else "x"), resp.text


def test_a_non_ascii_csrf_field_is_refused_and_nothing_answered(hw: World) -> None:
    """A console form whose CSRF field is not ASCII is a 403 like any wrong token: the run
    still waits, no memory is taught."""
    w = hw
    run = w.parked()
    session = sign_in(w.client, "ops")
    memory_before = w.db.keys(f"{w.settings.key_prefix}:mem:*")
    for csrf in ("é", session.csrf[:-1] + "é", "\u202e" * 64):
        resp = w.client.post(
            f"/ui/questions/{run}/answer",
            data={"csrf": csrf, "blocked": "1"},
            headers=session.headers,
            follow_redirects=False,
        )
        assert resp.status_code == 403, resp.text
        resp = w.client.post(
            "/ui/logout", data={"csrf": csrf}, headers=session.headers, follow_redirects=False
        )
        assert resp.status_code == 403, resp.text
    assert w.runs.load(run).status.value == "awaiting_answer"  # type: ignore[union-attr]
    assert w.db.keys(f"{w.settings.key_prefix}:mem:*") == memory_before


def test_a_cookie_with_a_non_ascii_signature_is_no_session(hw: World) -> None:
    """A console cookie whose signature is not ASCII signs no one in: pages send the person
    to sign in (303), fragments answer 401; signed in or not, never a 500."""
    w = hw
    o = w.owned()
    good = sign_in(w.client, "ops").cookie
    body, _, _ = good.rpartition(".")
    for cookie in (f"{body}.{'é' * 64}", f"{good[:-1]}é", "é.é.é.é"):
        header = f"{CONSOLE_COOKIE}={cookie}".encode("latin-1")
        for path, status in (
            ("/ui/fleet", 303),
            ("/ui/runs", 303),
            (f"/ui/runs/{o.run}", 303),
            ("/ui/questions", 303),
            ("/ui/memory", 303),
            ("/ui/fleet/rows", 401),
            (f"/ui/runs/{o.run}/rows", 401),
        ):
            resp = w.client.get(path, headers={"Cookie": header}, follow_redirects=False)
            assert resp.status_code == status, (path, cookie, resp.text)


def test_a_goal_with_invisible_characters_is_refused_naming_the_field(hw: World) -> None:
    """Zero-width characters and the line and paragraph separators hide or break a goal as
    C0/C1 and bidi characters do: 422 naming `goal` and the character; nothing stored."""
    w = hw
    before = _keys(w)
    for char in ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u2028", "\u2029"):
        for route, body in (
            ("/v1/runs", {"goal": f"Sign{char} in"}),
            ("/v1/batches", {"goal": f"Sign{char} in", "count": 1}),
            ("/v1/schedules", {"name": "n", "every_s": 60, "goal": f"Sign in{char}"}),
        ):
            resp = w.client.post(route, json=body, headers=auth("ops"))
            assert resp.status_code == 422, (route, repr(char), resp.text)
            problem = resp.json()["problems"][0]
            assert problem["field"] == "goal", problem
            assert f"U+{ord(char):04X}" in problem["problem"], problem
    assert _keys(w) == before


def test_a_malformed_id_is_refused_by_the_id_check_naming_its_form(hw: World) -> None:
    """A run or batch id that is not one is refused by the one id check, before the store is
    asked (the 404 says what an id looks like), with the same text for every role that may
    ask and whatever the id starts with."""
    w = hw
    run = w.parked()
    for path in ("/v1/runs/{}/steps", "/v1/batches/{}", "/v1/runs/{}/cancel"):
        method = "POST" if path.endswith("cancel") else "GET"
        texts = set()
        for who, given in (("alice", "not-an-id"), ("erin", "not-an-id"), ("ops", f"{run}*")):
            resp = w.client.request(method, path.format(given), headers=auth(who))
            assert resp.status_code == 404, resp.text
            body = resp.json()
            assert "32 hex characters" in body["fix"], body
            texts.add(body["fix"])
        assert len(texts) == 1, texts


def test_every_503_says_when_to_retry(redis_binary: str, tmp_path: Path) -> None:
    """A console page, fragment or form while Redis is down: each 503 carries `Retry-After`,
    as the API's do. (The connection cap's 503 is uvicorn's `limit_concurrency`, without one.)"""
    server = LocalRedis(binary=redis_binary)
    server.__enter__()
    try:
        with world(server.url, "gf503", tmp_path) as w:
            o = w.owned()
            ops = sign_in(w.client, "ops")
            client = TestClient(w.client.app, raise_server_exceptions=False)
            server.__exit__(None, None, None)
            for method, path, form in (
                ("GET", "/ui/fleet", None),
                ("GET", "/ui/runs/" + o.run + "/rows", None),
                ("GET", f"/ui/runs/{o.run}/pictures/{o.picture}", None),
                ("GET", f"/ui/questions/{o.run}", None),
                ("POST", f"/ui/questions/{o.run}/answer", {"csrf": ops.csrf, "blocked": "1"}),
            ):
                resp = client.request(method, path, data=form, headers=ops.headers)
                assert resp.status_code == 503, (path, resp.text)
                assert resp.headers["retry-after"] == str(RETRY_AFTER_S), path
    finally:
        server.__exit__(None, None, None)
