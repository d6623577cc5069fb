"""Where the scheduler may call a URL a submitter named: a suite's webhook.

Any `submit` token names a suite's webhook, and the scheduler, inside the fleet's network,
calls it. Unchecked, that is a request forgery: a webhook pointed at the fleet's own Redis,
a cloud's metadata address or a service behind the firewall. So a submitted webhook reaches
public addresses only (`reachable`: `is_global`, never multicast), unless the operator allows
a network (`GOALFLEET_WEBHOOK_ALLOW=10.20.0.0/16,…`). The fleet-wide `GOALFLEET_WEBHOOK_URL` is
the operator's own and goes anywhere.

Checked twice:

- at submit (`refusal`), a host that is an address, or a `localhost` name, that may not be
  reached: a 422 naming the field and the setting, nothing stored;
- at delivery (`scheduler.service.guarded_transport`), the address each connection actually
  reached, after the name was resolved: a name that resolves to a private address, or
  answers otherwise at delivery than it did at submit (DNS rebinding), is refused there, and
  not tried again.

This module holds the rule alone (the API imports it: no HTTP client with it).
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

Network = IPv4Network | IPv6Network
Address = IPv4Address | IPv6Address
ALLOW_SETTING = "GOALFLEET_WEBHOOK_ALLOW"


def reachable(address: Address, allow: Sequence[Network] = ()) -> bool:
    """Whether a submitted webhook may reach `address`: an allowed network's, or a public one
    (an IPv4 address written as IPv6, `::ffff:10.0.0.1`, is judged as the IPv4 one)."""
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in net for net in allow):
        return True
    return address.is_global and not address.is_multicast


def refusal(url: str, allow: Sequence[Network] = ()) -> str | None:
    """Why a submitted webhook URL is refused before anything is stored, or None: its host is
    an address (or a `localhost` name) it may not reach. Another name passes here and is
    judged by the address it reaches (`guarded_transport`)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        address: Address = IPv4Address("127.0.0.1")
    else:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return None
    if reachable(address, allow):
        return None
    return f"{host} is not a public address, and the fleet calls none but those it allows"
