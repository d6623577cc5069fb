"""Console sessions and sign-in throttling, over real HTTP (uvicorn, its own proxy-header
handling trusting loopback as it does by default) against a real Redis on a random port.

- A session is a record in Redis: signing out ends it (the old cookie signs in no more, across
  an API restart); rotating or removing a token ends its sessions, and putting the token back
  does not revive them; another token's sessions live on.
- Failed sign-ins and failed bearer tokens are counted per client: after the limit, 429 with a
  `Retry-After`, while a correct token from another client is unaffected.
- The session cookie is `Secure` when the request came over TLS (a trusted proxy's
  `X-Forwarded-Proto`) or when `console_cookie_secure` says so; `HttpOnly`, `SameSite=Strict`.
- The sign-in form refuses a cross-site POST (login CSRF) with a 403 that says why.
- Redis holds no session id, token or client address in clear, and every key it holds for
  sessions and failures expires.
"""

from __future__ import annotations

import re
from typing import cast

import httpx
import pytest
import redis
from conftest import Served, create
from pydantic import SecretStr
from redis_values import redis_values
from structlog.testing import capture_logs

from scheduler.local.redis import LocalRedis
from workers.settings import Settings

ALICE = ("alice", "alice-session-token-4c1d")
BOB = ("bob", "bob-session-token-93aa")
ROTATED = ("alice", "alice-rotated-token-77e0")
PREFIX = "sess"
FAILURES = 5
"""`api_auth_failures` in these tests."""
CLIENT_A = {"X-Forwarded-For": "203.0.113.5"}
CLIENT_B = {"X-Forwarded-For": "198.51.100.7"}
COOKIE = "goalfleet_console"


def settings_of(url: str, *tokens: tuple[str, str], **kw: object) -> Settings:
    return Settings(
        redis_url=url,
        key_prefix=PREFIX,
        api_tokens=[SecretStr(f"{n}:{t}") for n, t in tokens],
        api_roles=",".join(f"{n}:read" for n, _ in tokens),
        api_auth_failures=FAILURES,
        **kw,
    )


@pytest.fixture
def redis_url(own_redis: tuple[LocalRedis, redis.Redis]) -> str:
    return own_redis[0].url


def form_token(html: str) -> str:
    """The sign-in form's CSRF field ("" when the page has none)."""
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    return found.group(1) if found else ""


def sign_in(
    http: httpx.Client, token: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    """What a browser does: get the sign-in page (its cookie and form token), post the form
    with its cookie (sent by hand: a `Secure` one would not be over plain HTTP)."""
    page = http.get("/ui/login", headers=headers)
    assert page.status_code == 200, page.text
    data = {"token": token, "next": "/ui/fleet", "csrf": form_token(page.text)}
    nonce = re.search(r"goalfleet_login=([^;]*)", page.headers.get("set-cookie", ""))
    cookie = {"Cookie": f"goalfleet_login={nonce.group(1)}"} if nonce else {}
    return http.post("/ui/login", data=data, headers={**(headers or {}), **cookie})


def signed_in(http: httpx.Client) -> bool:
    resp = http.get("/ui/fleet")
    assert resp.status_code in (200, 303), resp.text
    return resp.status_code == 200


def logout_token(http: httpx.Client) -> str:
    html = http.get("/ui/fleet").text
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def test_sign_out_ends_the_session_even_for_a_kept_cookie_and_across_a_restart(
    redis_url: str, serve: type[Served]
) -> None:
    """A cookie copied before sign-out opens nothing after it, on this API and a new one."""
    settings = settings_of(redis_url, ALICE)
    srv = serve(create(settings))
    with httpx.Client(base_url=srv.url) as http:
        assert sign_in(http, ALICE[1]).status_code == 303
        kept = http.cookies[COOKIE]
        assert signed_in(http)
        out = http.post("/ui/logout", data={"csrf": logout_token(http)})
        assert out.status_code == 303
        assert not signed_in(http)
    with httpx.Client(base_url=srv.url, cookies={COOKIE: kept}) as thief:
        assert not signed_in(thief)
    srv.stop()
    again = serve(create(settings))
    with httpx.Client(base_url=again.url, cookies={COOKIE: kept}) as thief:
        assert not signed_in(thief)


def test_removing_or_rotating_a_token_ends_its_sessions_and_restoring_it_revives_none(
    redis_url: str, serve: type[Served]
) -> None:
    """alice's token removed (restart), then restored (restart): her old cookie stays dead;
    rotated: dead too. bob's session lives through all of it."""
    both = settings_of(redis_url, ALICE, BOB)

    def cookie_of(token: str, url: str) -> str:
        with httpx.Client(base_url=url) as http:
            assert sign_in(http, token).status_code == 303
            return http.cookies[COOKIE]

    def opens(url: str, cookie: str) -> bool:
        with httpx.Client(base_url=url, cookies={COOKIE: cookie}) as http:
            return signed_in(http)

    first = serve(create(both))
    alices, bobs = cookie_of(ALICE[1], first.url), cookie_of(BOB[1], first.url)
    assert opens(first.url, alices)
    first.stop()

    without = serve(create(settings_of(redis_url, BOB)))
    assert not opens(without.url, alices)
    assert opens(without.url, bobs)
    without.stop()

    restored = serve(create(both))
    assert not opens(restored.url, alices), "restoring the token revived an old session"
    assert opens(restored.url, bobs)
    fresh = cookie_of(ALICE[1], restored.url)
    assert opens(restored.url, fresh)
    restored.stop()

    rotated = serve(create(settings_of(redis_url, ROTATED, BOB)))
    assert not opens(rotated.url, fresh)
    assert opens(rotated.url, bobs), "rotating alice's token ended bob's session"
    assert opens(rotated.url, cookie_of(ROTATED[1], rotated.url))


def test_failed_sign_ins_from_one_client_are_throttled_and_others_are_not(
    redis_url: str, serve: type[Served]
) -> None:
    """After FAILURES wrong tokens from client A, A gets 429 with a Retry-After (its right
    token too); client B's right token still signs in."""
    srv = serve(create(settings_of(redis_url, ALICE)))
    with httpx.Client(base_url=srv.url) as http:
        codes = [sign_in(http, f"wrong-{i}", CLIENT_A).status_code for i in range(FAILURES)]
        assert codes == [401] * FAILURES
        refused = sign_in(http, "wrong-again", CLIENT_A)
        assert refused.status_code == 429, refused.text
        assert 0 < int(refused.headers["retry-after"]) <= 60
        assert "Too many failed sign-ins" in refused.text
        assert sign_in(http, ALICE[1], CLIENT_A).status_code == 429
        assert COOKIE not in http.cookies
    with httpx.Client(base_url=srv.url) as other:
        assert sign_in(other, ALICE[1], CLIENT_B).status_code == 303


def test_failed_bearer_tokens_from_one_client_are_throttled_and_others_are_not(
    redis_url: str, serve: type[Served]
) -> None:
    """The API's bearer check counts wrong tokens per client the same way (the console's and
    the API's failures share the count): 401 up to the limit, then 429 with a Retry-After;
    a right token from another client answers 200, from the throttled one 429."""
    srv = serve(create(settings_of(redis_url, ALICE)))
    with httpx.Client(base_url=srv.url) as http:

        def devices(token: str, client: dict[str, str]) -> httpx.Response:
            return http.get("/v1/devices", headers={"Authorization": f"Bearer {token}", **client})

        with capture_logs() as logs:
            codes = [devices(f"wrong-{i}", CLIENT_A).status_code for i in range(FAILURES)]
            assert codes == [401] * FAILURES
            again = devices(f"wrong-{FAILURES - 1}", CLIENT_A)  # the last one again: not new
            refused = devices("wrong-again", CLIENT_A)
            assert devices("wrong-0", CLIENT_A).status_code == 429
        assert again.status_code == 401
        assert refused.status_code == 429, refused.text
        assert 0 < int(refused.headers["retry-after"]) <= 60
        assert refused.json()["error"] == "TOO_MANY_FAILURES"
        blocked = [e for e in logs if e["event"] == "auth_client_blocked"]
        assert [e["client"] for e in blocked] == ["203.0.113.5"]  # once, naming the client
        assert devices(ALICE[1], CLIENT_B).status_code == 200
        assert devices(ALICE[1], CLIENT_A).status_code == 429
        assert sign_in(http, ALICE[1], CLIENT_A).status_code == 429
        assert http.get("/v1/devices").status_code == 401  # no token: nothing guessed


def test_the_cookie_is_secure_over_tls_or_when_set_and_always_httponly_and_strict(
    redis_url: str, serve: type[Served]
) -> None:
    """Plain HTTP: no `Secure`; behind a TLS proxy (trusted `X-Forwarded-Proto: https`), or
    with `console_cookie_secure`: `Secure`. `HttpOnly` and `SameSite=Strict` always."""

    def set_cookie(settings: Settings, headers: dict[str, str] | None = None) -> str:
        srv = serve(create(settings))
        with httpx.Client(base_url=srv.url) as http:
            resp = sign_in(http, ALICE[1], headers)
            assert resp.status_code == 303, resp.text
            cookie = next(c for c in resp.headers.get_list("set-cookie") if COOKIE in c)
        srv.stop()
        return cookie.lower()

    plain = set_cookie(settings_of(redis_url, ALICE))
    tls = set_cookie(settings_of(redis_url, ALICE), {"X-Forwarded-Proto": "https"})
    forced = set_cookie(settings_of(redis_url, ALICE, console_cookie_secure=True))
    for cookie in (plain, tls, forced):
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        assert "path=/ui" in cookie
    assert "secure" not in plain.replace("samesite", "")
    assert "; secure" in tls
    assert "; secure" in forced


def test_sign_in_refuses_a_cross_site_post(redis_url: str, serve: type[Served]) -> None:
    """Another site's form posting a token (login CSRF): refused with a 403 saying why,
    whether the browser says so (`Sec-Fetch-Site`) or the form lacks this browser's token."""
    srv = serve(create(settings_of(redis_url, ALICE)))
    with httpx.Client(base_url=srv.url) as http:
        cross = http.post(
            "/ui/login",
            data={"token": ALICE[1], "next": "/ui/fleet"},
            headers={"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        )
        assert cross.status_code == 403, cross.text
        assert "another site" in cross.text
        assert COOKIE not in http.cookies
        bare = http.post("/ui/login", data={"token": ALICE[1], "next": "/ui/fleet"})
        assert bare.status_code == 403, bare.text
        assert "reload the sign-in page" in bare.text
        page = http.get("/ui/login")
        stolen = form_token(page.text)
    with httpx.Client(base_url=srv.url) as victim:  # the form's token without its cookie
        forged = victim.post("/ui/login", data={"token": ALICE[1], "csrf": stolen})
        assert forged.status_code == 403, forged.text
        assert COOKIE not in victim.cookies
        assert sign_in(victim, ALICE[1], {"Sec-Fetch-Site": "same-origin"}).status_code == 303


def test_redis_holds_nothing_secret_and_every_key_expires(
    own_redis: tuple[LocalRedis, redis.Redis], serve: type[Served]
) -> None:
    """After sign-ins and failures: no token, session id or client address in any key or
    value; every session and failure key has a TTL."""
    server, db = own_redis
    srv = serve(create(settings_of(server.url, ALICE)))
    with httpx.Client(base_url=srv.url) as http:
        assert sign_in(http, ALICE[1], CLIENT_B).status_code == 303
        sid = http.cookies[COOKIE].split(".")[1]
        for i in range(3):
            sign_in(http, f"wrong-{i}", CLIENT_A)
    dump = redis_values(db)
    text = b" ".join([k + b" " + b" ".join(v) for k, v in dump.items()])
    for secret in (ALICE[1], sid, "203.0.113.5", "198.51.100.7", "wrong-1"):
        assert secret.encode() not in text, secret
    ours = [str(k) for k in cast("list[str]", db.keys(f"{PREFIX}:console:*"))]
    ours += [str(k) for k in cast("list[str]", db.keys(f"{PREFIX}:authfail*"))]
    sessions = [k for k in ours if ":session:" in k]
    failures = [k for k in ours if "authfail" in k]
    assert len(sessions) == 1, ours
    assert len(failures) == 2, ours  # client A's count and every client's
    for key in sessions + failures:
        assert cast("int", db.ttl(key)) > 0, key


def test_a_wrong_token_given_again_counts_once(redis_url: str, serve: type[Served]) -> None:
    """A client stuck on one old token is no guesser: 3 x FAILURES of the same wrong token (as
    a bearer token and on the sign-in form alike) are all 401 and block nothing; FAILURES new
    ones then do."""
    srv = serve(create(settings_of(redis_url, ALICE)))
    with httpx.Client(base_url=srv.url, headers=CLIENT_A) as http:
        stale = {"Authorization": "Bearer an-old-token"}
        codes = {http.get("/v1/devices", headers=stale).status_code for _ in range(3 * FAILURES)}
        assert codes == {401}
        assert sign_in(http, "an-old-token").status_code == 401  # the same one, signing in
        assert http.get("/v1/devices", headers={"Authorization": f"Bearer {ALICE[1]}"}).is_success
        guesses = [
            http.get("/v1/devices", headers={"Authorization": f"Bearer guess-{i}"}).status_code
            for i in range(FAILURES)
        ]
        assert guesses == [401] * (FAILURES - 1) + [429]  # the stale one was the first


def test_many_addresses_guessing_get_one_guess_each(redis_url: str, serve: type[Served]) -> None:
    """Past the fleet-wide count, a client that gave one wrong token is blocked (its right
    token too), while a client that gave none is served."""
    settings = settings_of(redis_url, ALICE, api_auth_failures_fleet=3)
    srv = serve(create(settings))
    right = {"Authorization": f"Bearer {ALICE[1]}"}
    with httpx.Client(base_url=srv.url) as http:

        def devices(i: int, auth: dict[str, str]) -> httpx.Response:
            return http.get("/v1/devices", headers={**auth, "X-Forwarded-For": f"192.0.2.{i}"})

        firsts = [devices(i, {"Authorization": f"Bearer guess-{i}"}) for i in range(1, 5)]
        assert [r.status_code for r in firsts] == [401, 401, 401, 429]
        assert devices(1, right).status_code == 429
        assert devices(9, right).status_code == 200
        assert sign_in(http, ALICE[1], {"X-Forwarded-For": "192.0.2.2"}).status_code == 429
        assert sign_in(http, ALICE[1], {"X-Forwarded-For": "192.0.2.9"}).status_code == 303
