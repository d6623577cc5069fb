"""Where the scheduler may call a URL a submitter named: a suite's webhook.

Any `submit` token names a suite's webhook, and the scheduler, inside the fleet's network,
calls it. Unchecked, that is a request forgery: a webhook pointed at the fleet's own Redis,
a cloud's metadata address or a service behind the firewall. So a submitted webhook reaches
public addresses only (`reachable`: `is_global`, never multicast), unless the operator allows
a network (`GOALFLEET_WEBHOOK_ALLOW=10.20.0.0/16,…`). The fleet-wide `GOALFLEET_WEBHOOK_URL` is
the operator's own and goes anywhere.

Checked twice, by one rule (`reachable`):

- at submit (`refusal`), every address the host names: the address itself in any spelling
  the resolver reads as one (`127.1`, `2130706433`, `0x7f000001`, `017700000001`: IPv4 as
  `inet_aton` reads it; IPv6 with or without brackets or a zone), a `localhost` name, and any
  other name as it resolves now (the hosts file, then DNS, within `RESOLVE_TIMEOUT_S`): a 422
  naming the field and the setting when one of them may not be reached, nothing stored;
- at delivery (`scheduler.service.guarded_transport`), the address each connection actually
  reached, after the name was resolved: a name that did not resolve at submit, or answers
  otherwise at delivery than it did then (DNS rebinding), is refused there, and not tried
  again.

An IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`,
NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`) is judged as that IPv4 address: a
gateway or the kernel takes it there.

This module holds the rule alone (the API imports it: no HTTP client with it).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

Network = IPv4Network | IPv6Network
Address = IPv4Address | IPv6Address
Resolver = Callable[[str], tuple[Address, ...]]
ALLOW_SETTING = "GOALFLEET_WEBHOOK_ALLOW"
RESOLVE_TIMEOUT_S = 2.0
"""How long a submit waits for a webhook's name to resolve; past it, or when the name does
not resolve, the delivery's check judges the address it reaches."""

_IPV4_NUMBERS = re.compile(r"[0-9a-fx.]+", re.IGNORECASE)
"""What `inet_aton` may read as an address (it also takes trailing junk after a space: no)."""
_IPV4_IN_IPV6 = (
    IPv6Network("::/96"),  # IPv4-compatible (deprecated; :: and ::1 are judged as they are)
    IPv6Network("64:ff9b::/96"),  # NAT64, well-known prefix
    IPv6Network("64:ff9b:1::/48"),  # NAT64, local use
)


def ipv4_inside(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one carries to where it is delivered, if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if int(address) > 1 and any(address in net for net in _IPV4_IN_IPV6):
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def reachable(address: Address, allow: Sequence[Network] = ()) -> bool:
    """Whether a submitted webhook may reach `address`: an allowed network's, or a public one
    (an IPv6 address that carries an IPv4 one is judged as the IPv4 one: `ipv4_inside`)."""
    if isinstance(address, IPv6Address) and (inside := ipv4_inside(address)) is not None:
        address = inside
    if any(address in net for net in allow):
        return True
    return address.is_global and not address.is_multicast


def spelled(host: str) -> Address | None:
    """The address `host` is, in any spelling the resolver reads as one (None: a name)."""
    bare = host.removeprefix("[").removesuffix("]").removesuffix(".")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if _IPV4_NUMBERS.fullmatch(bare):
        try:
            return IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


def resolve(host: str, timeout_s: float = RESOLVE_TIMEOUT_S) -> tuple[Address, ...]:
    """What the name `host` resolves to now (the hosts file, then DNS): () when it does not,
    or not within `timeout_s` (the lookup is left to finish in its thread)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhook-resolve")
    try:
        found = pool.submit(socket.getaddrinfo, host, None, type=socket.SOCK_STREAM)
        infos = found.result(timeout=timeout_s)
    except (OSError, UnicodeError, TimeoutError):
        return ()
    finally:
        pool.shutdown(wait=False)
    return tuple(ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos)


def webhook_host(url: str) -> str:
    """A URL's host as the resolver will be asked for it: lower case, percent-decoded, a
    name in other scripts as IDNA writes it (`localhost` in fullwidth letters is `localhost`)."""
    host = urllib.parse.unquote(urllib.parse.urlsplit(url).hostname or "")
    if not host.isascii():
        with contextlib.suppress(UnicodeError):  # no resolver reads it either
            host = host.encode("idna").decode("ascii")
    return host.lower()


def addresses(host: str, resolver: Resolver = resolve) -> tuple[Address, ...]:
    """Every address `host` names: itself, when it is one; 127.0.0.1 for a `localhost` name
    (never asked of DNS: RFC 6761); else what `resolver` finds for the name."""
    if (address := spelled(host)) is not None:
        return (address,)
    name = host.removesuffix(".")
    if name == "localhost" or name.endswith(".localhost"):
        return (IPv4Address("127.0.0.1"),)
    return resolver(host)


def refusal(url: str, allow: Sequence[Network] = (), resolver: Resolver = resolve) -> str | None:
    """Why a submitted webhook URL is refused before anything is stored, or None: an address
    its host names may not be reached (`addresses`, `reachable`). A name that does not resolve
    here passes, and is judged by the address it reaches (`guarded_transport`)."""
    host = webhook_host(url)
    refused = [a for a in addresses(host, resolver) if not reachable(a, allow)]
    if not refused:
        return None
    shown = host if str(refused[0]) == host else f"{host} ({refused[0]})"
    return f"{shown} is not a public address, and the fleet calls none but those it allows"
