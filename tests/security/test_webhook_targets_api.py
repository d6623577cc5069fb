"""A suite's webhook at submit (in-process ASGI, real Redis): a batch or a schedule whose
webhook names a private, loopback or link-local address is refused with a 422 naming the
field and the setting that would allow it, and nothing is written; a public receiver, or one
in a network `GOALFLEET_WEBHOOK_ALLOW` allows, is taken. The host is judged in every spelling
the resolver reads (IPv4 as `inet_aton` reads it, IPv6 with an IPv4 inside, IDNA, this
host's /etc/hosts names, any name as it resolves) by the rule the delivery applies."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKEN, Api
from fastapi.testclient import TestClient
from pydantic import SecretStr

from scheduler.api.app import create_app
from scheduler.local.redis import LocalRedis
from workers.core.model import Platform
from workers.core.records import DeviceInfo
from workers.fleet.connections import redis_client
from workers.fleet.keys import Keys
from workers.fleet.state.devices import DeviceRegistry
from workers.settings import Settings

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _api(server: LocalRedis, prefix: str, **over: object) -> Api:
    settings = Settings.model_validate(
        {
            "redis_url": server.url,
            "key_prefix": prefix,
            "api_tokens": [SecretStr(TOKEN)],
            "webhook_secret": SecretStr("signing-key"),
            **over,
        }
    )
    return Api(create_app(settings), settings, redis_client(settings.redis_url))


@pytest.fixture
def signing(sec_redis: LocalRedis) -> Iterator[tuple[Api, TestClient]]:
    api = _api(sec_redis, "gfw")
    with TestClient(api.app) as c:
        yield api, c
    api.db.close()


def _suite(webhook: str) -> dict[str, Any]:
    return {
        "suite": "nightly",
        "flows": [{"name": "signin", "goal": "Sign in", "matrix": [{"platform": "ios"}]}],
        "webhook": webhook,
    }


def _hosts_file_loopback_names() -> list[str]:
    """This host's /etc/hosts names for loopback, `localhost` aside (e.g. its own name)."""
    names = []
    with contextlib.suppress(OSError):
        for line in Path("/etc/hosts").read_text().splitlines():
            address, *aliases = line.partition("#")[0].split() or [""]
            with contextlib.suppress(ValueError):
                if ipaddress.ip_address(address).is_loopback:
                    names += [a for a in aliases if a != "localhost"]
    return names


OTHER_SPELLINGS = [
    "http://127.1/",  # IPv4 as the resolver reads it (inet_aton): shortened,
    "http://2130706433/",  # one decimal number,
    "http://0x7f000001/",  # hex,
    "http://017700000001/",  # octal,
    "http://0177.0.0.1/",  # an octal part,
    "http://0/",  # 0.0.0.0
    "http://127.0.0.1./",  # a trailing dot
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped IPv6
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",  # IPv4-compatible IPv6
    "http://[64:ff9b::10.0.0.7]/",  # NAT64: a gateway reaches 10.0.0.7
    "http://[2002:a00:7::1]/",  # 6to4 of 10.0.0.7
    "http://[fe80::1%25eth0]/",  # link-local with a zone
    "http://LOCALHOST/",
    "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",  # fullwidth localhost
    "http://%31%32%37.0.0.1/",  # percent-encoded
]
"""Issue 44, finding 7: each was taken (201) at submit, refused only at delivery."""


@pytest.mark.parametrize(
    "webhook",
    [
        "http://127.0.0.1:6379/",
        "http://localhost:8787/v1/memory",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9090/",
        "http://10.0.0.7/hook",
        *OTHER_SPELLINGS,
        *(f"http://{name}:8080/" for name in _hosts_file_loopback_names()),
    ],
)
@pytest.mark.parametrize("path", ["/v1/batches", "/v1/schedules"])
def test_a_private_webhook_is_refused_and_nothing_is_written(
    signing: tuple[Api, TestClient], webhook: str, path: str
) -> None:
    api, client = signing
    body = _suite(webhook) | ({"name": "nightly", "every_s": 3600} if "schedules" in path else {})
    before = api.db.dbsize()
    resp = client.post(path, json=body, headers=AUTH)
    assert resp.status_code == 422, resp.text
    problem = resp.json()["problems"][0]
    assert problem["field"] == "webhook"
    assert "not a public address" in problem["problem"]
    assert "GOALFLEET_WEBHOOK_ALLOW" in problem["fix"]
    assert api.db.dbsize() == before


def test_a_public_or_allowed_webhook_is_taken(sec_redis: LocalRedis) -> None:
    api = _api(sec_redis, "gfw2", webhook_allow="10.0.0.0/8")
    info = DeviceInfo(id="gfw2-ios", platform=Platform.IOS, os_version="17.5")
    DeviceRegistry(api.db, Keys("gfw2")).register(info, "w@gfw2-ios", lease_s=3600)
    with TestClient(api.app) as client:
        for webhook in (
            "https://ci.example.com/hooks/goalfleet",
            "http://10.0.0.7/hook",
            "http://10.7/hook",  # 10.0.0.7, spelled short: allowed as well
            "http://[::ffff:10.0.0.7]/hook",
            "http://8.8.8.8/hook",
            "http://134744072/hook",  # 8.8.8.8 as one number: public
        ):
            resp = client.post("/v1/batches", json=_suite(webhook), headers=AUTH)
            assert resp.status_code == 201, resp.text
        refused = client.post("/v1/batches", json=_suite("http://127.0.0.1:1/"), headers=AUTH)
        assert refused.status_code == 422, refused.text
    api.db.close()
