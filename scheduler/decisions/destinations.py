"""Where the node may send requests a user named: public destinations only, unless the operator
allows an internal one.

An alert channel's URL makes the node POST to a place a team admin chose, from inside the
platform's network: to the cloud's metadata service (``169.254.169.254``), to loopback services
(the node's own ``/v1/internal``), to private ranges. A destination is refused when its host is,
or resolves to, an address that is not public (:func:`address_refusal`: loopback, unspecified,
link-local, private, shared/CGNAT, multicast, reserved, documentation and benchmarking ranges,
and IPv6 forms that carry such an IPv4 address: v4-mapped, 6to4, Teredo, NAT64). Every address a
name resolves to must pass, since the client may use any of them.

The check runs when a channel is created and again before every send, and a send then goes to
the very address that was checked (:class:`Target`: the URL with the address as its host, the
name as its ``Host`` header and TLS server name), so a name that resolves to a public address
once and to an internal one later (DNS rebinding) gains nothing.

``DROVER_ALERT_ALLOWED_HOSTS`` names the exceptions (:meth:`Destinations.parse`): host names,
matched exactly and case-insensitively (such a destination is sent to by name), and addresses or
networks (``127.0.0.1``, ``[::1]``, ``10.1.0.0/16``), whose addresses pass wherever they come
from.

Pure: resolution is the caller's ``getaddrinfo`` (``socket.getaddrinfo``, or a stand-in in tests).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from scheduler.core.errors import InvalidInput

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
#: ``socket.getaddrinfo``, or anything answering like it
GetAddrInfo = Callable[..., Any]

#: shared address space (carrier-grade NAT), not "private" to ``ipaddress`` but never public
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
#: the well-known NAT64 prefix: its last 32 bits are the IPv4 address reached
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
SCHEMES = ("http", "https")


def address_refusal(address: Address) -> str | None:
    """Why ``address`` is not a public destination (None: it is)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded: list[tuple[str, ipaddress.IPv4Address | None]] = [
            ("v4-mapped", address.ipv4_mapped),
            ("6to4", address.sixtofour),
            (
                "NAT64",
                ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in _NAT64 else None,
            ),  # fmt: skip
        ]
        if address.teredo is not None:
            embedded += [("Teredo", address.teredo[0]), ("Teredo", address.teredo[1])]
        for form, v4 in embedded:
            if v4 is not None:
                reason = address_refusal(v4)
                if reason is not None:
                    return f"{form} form of a {reason} address"
        if address in _NAT64:
            return None  # a public IPv4 address through NAT64
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified:
        return "unspecified"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "shared (CGNAT)"
    if address.is_private:
        return "private"
    if address.is_reserved:
        return "reserved"
    if not address.is_global:
        return "non-global"
    return None


@dataclass(frozen=True)
class Target:
    """Where one request goes: ``url`` (its host the checked address, or the allowed name),
    with ``host_header`` and ``sni`` (the name) when pinned to an address."""

    url: str
    #: the URL's host name (or address literal)
    host: str
    #: the address the request is pinned to (None: an allowed name, sent to by name)
    address: str | None
    host_header: str | None = None
    sni: str | None = None


@dataclass(frozen=True)
class Destinations:
    """The operator's exceptions to "public destinations only"."""

    names: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, raw: str) -> Destinations:
        """``DROVER_ALERT_ALLOWED_HOSTS``: comma-separated host names, addresses (``[::1]``
        too) and networks (``10.1.0.0/16``); ValueError on a malformed network."""
        names: set[str] = set()
        networks: list[Network] = []
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            literal = item[1:-1] if item.startswith("[") and item.endswith("]") else item
            try:
                networks.append(ipaddress.ip_network(literal, strict=False))
            except ValueError:
                if "/" in literal or ":" in literal or not literal.strip("0123456789."):
                    raise ValueError(f"not a host name, address or network: {item!r}") from None
                names.add(literal.lower().rstrip("."))
        return cls(frozenset(names), tuple(networks))

    def allowed(self, address: Address) -> bool:
        return any(address.version == n.version and address in n for n in self.networks)

    def check(self, url: str, getaddrinfo: GetAddrInfo) -> Target:
        """Where a request to ``url`` may go, resolving its host with ``getaddrinfo``.

        InvalidInput: not an http(s) URL with a host, or a host that is (or resolves to) an
        address that is neither public nor allowed; OSError: the name does not resolve."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower().rstrip(".")
        if scheme not in SCHEMES or not host:
            raise InvalidInput("an alert channel's URL is an http or https URL with a host")
        if host in self.names:
            return Target(url, host, None)
        port = parts.port or (443 if scheme == "https" else 80)
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            found = getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]
            if not addresses:
                raise OSError(f"{host} resolves to no address") from None
        for address in addresses:
            reason = address_refusal(address)
            if reason is not None and not self.allowed(address):
                raise InvalidInput(
                    f"refused destination: {host} is, or resolves to, not a public address "
                    f"({reason}); an operator may allow it (DROVER_ALERT_ALLOWED_HOSTS)"
                )
        pinned = str(addresses[0])
        literal = f"[{pinned}]" if addresses[0].version == 6 else pinned
        netloc = literal if parts.port is None else f"{literal}:{parts.port}"
        return Target(
            urlunsplit((scheme, netloc, parts.path, parts.query, "")),
            host,
            pinned,
            host_header=host if parts.port is None else f"{host}:{parts.port}",
            sni=host,
        )


def mask_url(url: str) -> str:
    """``url`` as shown to those who may not see it whole (a Slack webhook URL is a
    credential): its scheme and host (and port) only."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return f"{parts.scheme}://{netloc}/…"
