"""Who a wrong token is counted against (`scheduler.api.throttle.client_of`): an IPv6 host
holds a whole /64, so every address of one /64 is one client; an IPv4-mapped IPv6 address is
its IPv4 one; anything else is itself (bounded)."""

from __future__ import annotations

from scheduler.api.throttle import client_of


def test_an_ipv6_64_is_one_client_and_the_next_64_another() -> None:
    same = {client_of("2001:db8:1:2::1"), client_of("2001:db8:1:2:ffff:ffff:ffff:fffe")}
    assert same == {"2001:db8:1:2::/64"}
    assert client_of("2001:db8:1:3::1") == "2001:db8:1:3::/64"


def test_ipv4_and_its_mapped_form_are_one_client() -> None:
    assert client_of("::ffff:203.0.113.5") == client_of("203.0.113.5") == "203.0.113.5"
    assert client_of("203.0.113.6") != client_of("203.0.113.5")


def test_a_host_that_is_no_address_is_itself_bounded_and_none_is_unknown() -> None:
    assert client_of("testclient") == "testclient"
    assert len(client_of("x" * 10_000)) == 100
    assert client_of(None) == client_of("") == "unknown"
