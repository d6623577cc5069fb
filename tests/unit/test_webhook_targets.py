"""Where a suite's webhook may go (`scheduler.service.outbound`, `guarded_transport`): public
addresses, and the networks `GOALFLEET_WEBHOOK_ALLOW` allows; never the fleet's own Redis, a
metadata address or anything else inside, by address or by a name that resolves there. The
fleet-wide URL is the operator's and goes anywhere. Deliveries go to a real HTTP server on
loopback, through the real transport."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

import pytest
import redis
import structlog
from httpkit import HookReceiver

from scheduler.service.outbound import reachable, refusal, resolve, spelled
from scheduler.service.webhooks import Webhooks
from scheduler.store.runs import FleetStore
from workers.core.backoff import Backoff
from workers.fleet.keys import Keys

NO_WAIT = Backoff(base_s=0.001, cap_s=0.001, jitter=0)
LOOPBACK = (ip_network("127.0.0.0/8"),)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",  # the fleet's own Redis, API, metrics
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",  # a cloud's metadata address
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",  # noqa: S104 - an address to refuse, not to bind
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00::5",
        "::ffff:127.0.0.1",  # an IPv4 loopback written as IPv6
        "::ffff:10.0.0.1",
    ],
)
def test_no_private_loopback_link_local_or_multicast_address(address: str) -> None:
    assert not reachable(ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_are_reachable(address: str) -> None:
    assert reachable(ip_address(address))


def test_an_allowed_network_is_reachable_and_only_it() -> None:
    allow = (ip_network("10.20.0.0/16"),)
    assert reachable(ip_address("10.20.3.4"), allow)
    assert reachable(ip_address("::ffff:10.20.3.4"), allow)
    assert not reachable(ip_address("10.21.0.1"), allow)
    assert not reachable(ip_address("127.0.0.1"), allow)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",
        "http://localhost:8080/hook",
        "http://api.localhost/hook",
        "http://[::1]:8787/v1/memory",
        "https://169.254.169.254/latest/meta-data/",
        "http://[::ffff:7f00:1]/",
    ],
)
def test_a_private_address_is_refused_at_submit(url: str) -> None:
    why = refusal(url)
    assert why is not None
    assert "not a public address" in why


def test_a_name_or_a_public_or_allowed_address_passes_submit() -> None:
    assert refusal("https://ci.example.com/hooks/goalfleet") is None  # judged where it connects
    assert refusal("http://93.184.216.34/hook") is None
    assert refusal("http://127.0.0.1:9000/hook", LOOPBACK) is None
    assert refusal("http://localhost:9000/hook", LOOPBACK) is None


@pytest.mark.parametrize(
    ("address", "carries"),
    [
        ("::ffff:10.0.0.7", "10.0.0.7"),  # IPv4-mapped
        ("::10.0.0.7", "10.0.0.7"),  # IPv4-compatible
        ("64:ff9b::10.0.0.7", "10.0.0.7"),  # NAT64: the gateway calls 10.0.0.7
        ("64:ff9b:1::a00:7", "10.0.0.7"),  # NAT64, local use
        ("2002:a00:7::1", "10.0.0.7"),  # 6to4
        ("64:ff9b::8.8.8.8", "8.8.8.8"),
    ],
)
def test_an_ipv6_address_with_an_ipv4_inside_is_judged_as_that(address: str, carries: str) -> None:
    """Python calls `::10.0.0.7`, `64:ff9b::10.0.0.7` and `2002:a00:7::1` global; where they
    are delivered they reach 10.0.0.7 (issue 44, finding 7). Submit and delivery share it."""
    inside = ip_address(carries)
    assert reachable(ip_address(address)) is reachable(inside)
    assert reachable(ip_address(address), (ip_network(f"{carries}/32"),))


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("10.7", "10.0.0.7"),
        ("0", "0.0.0.0"),  # noqa: S104 - an address to refuse, not to bind
        ("127.0.0.1.", "127.0.0.1"),
        ("[::1]", "::1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
    ],
)
def test_every_spelling_the_resolver_reads_is_that_address(host: str, address: str) -> None:
    """`spelled` reads a host as `inet_aton` and `getaddrinfo` do; the submit check refuses
    it exactly when the delivery's check would refuse the address it connects to."""
    assert spelled(host) == ip_address(address)
    in_url = f"[{host}]" if ":" in host and not host.startswith("[") else host
    taken = refusal(f"http://{in_url}/x", resolver=never) is None
    assert taken is reachable(ip_address(address))


def test_not_addresses() -> None:
    """Names stay names (and `inet_aton`'s trailing junk after a space is not read)."""
    for host in ("ci.example.com", "1.2.3.4 x", "08", "0x", "deadbeef", "127.0.0.1.5.6"):
        assert spelled(host) is None, host


def never(host: str) -> tuple[IPv4Address | IPv6Address, ...]:
    raise AssertionError(f"{host} is an address, not a name to resolve")


def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    """One private address among public ones refuses it; no answer passes it to the
    delivery's check; a `localhost` name is never asked of the resolver."""
    answers = {
        "public.test": (ip_address("8.8.8.8"),),
        "mixed.test": (ip_address("8.8.8.8"), ip_address("10.0.0.7")),
        "gone.test": (),
    }
    assert refusal("https://public.test/x", resolver=answers.__getitem__) is None
    why = refusal("https://mixed.test/x", resolver=answers.__getitem__)
    assert why == (
        "mixed.test (10.0.0.7) is not a public address, and the fleet calls none but those "
        "it allows"
    )
    assert refusal("https://gone.test/x", resolver=answers.__getitem__) is None
    assert refusal("http://localhost./x", resolver=never) is not None
    assert refusal("http://a.localhost/x", resolver=never) is not None


def test_the_resolver_reads_the_hosts_file() -> None:
    """The real resolver: `localhost` through the hosts file, as the delivery will connect."""
    assert ip_address("127.0.0.1") in resolve("localhost") or ip_address("::1") in resolve(
        "localhost"
    )
    assert resolve("name.invalid") == ()  # RFC 6761: never resolves


@pytest.fixture
def receiver() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.stop()


def hooks(client: redis.Redis, **kwargs: object) -> Webhooks:
    keys = Keys("whr")
    store = FleetStore(client, keys, retention_s=60)
    return Webhooks(client, keys, store, secret="k", attempts=3, backoff=NO_WAIT, **kwargs)  # type: ignore[arg-type]


def test_a_suite_webhook_to_loopback_is_refused_once_and_never_sent(
    client: redis.Redis, receiver: HookReceiver
) -> None:
    """By address, and by a name that resolves to loopback: not one request reaches the
    server, the call is not tried again, and the log says why."""
    h = hooks(client)
    with structlog.testing.capture_logs() as logs:
        for host in ("127.0.0.1", "localhost"):
            assert not h.deliver(f"http://{host}:{receiver.port}/x", "run.failed", "1-0", b"{}")
    h.close()
    assert receiver.posts == 0
    refused = [e for e in logs if e["event"] == "webhook_refused"]
    assert len(refused) == 2, logs
    assert "not a public address" in refused[0]["why"]
    assert "GOALFLEET_WEBHOOK_ALLOW" in refused[0]["why"]
    assert not [e for e in logs if e["event"] == "webhook_retry"]  # refused, not retried


def test_an_allowed_network_is_called(client: redis.Redis, receiver: HookReceiver) -> None:
    h = hooks(client, allow=LOOPBACK)
    assert h.deliver(f"http://127.0.0.1:{receiver.port}/x", "run.failed", "1-0", b"{}")
    assert h.deliver(f"http://localhost:{receiver.port}/x", "run.failed", "2-0", b"{}")
    h.close()
    assert receiver.posts == 2


def test_the_fleet_wide_url_is_the_operators_and_goes_anywhere(
    client: redis.Redis, receiver: HookReceiver
) -> None:
    url = f"http://127.0.0.1:{receiver.port}/fleet"
    h = hooks(client, fleet_url=url)
    assert h.deliver(url, "batch.finished", "1-0", b"{}")
    h.close()
    assert receiver.posts == 1


def test_ipv6_loopback_is_refused_too(client: redis.Redis) -> None:
    r = HookReceiver("::1")
    try:
        h = hooks(client)
        assert not h.deliver(f"http://[::1]:{r.port}/x", "run.failed", "1-0", b"{}")
        h.close()
        assert r.posts == 0
    finally:
        r.stop()
