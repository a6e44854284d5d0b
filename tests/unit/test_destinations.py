"""Where alert channels may send: public destinations only, unless allowed
(scheduler/decisions/destinations.py)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.errors import InvalidInput
from scheduler.decisions.destinations import Destinations, address_refusal, mask_url

NOT_PUBLIC = [
    "127.0.0.1",
    "127.8.9.10",
    "0.0.0.0",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "169.254.169.254",  # the cloud's metadata service
    "100.64.0.1",  # CGNAT (shared address space)
    "100.127.255.254",
    "224.0.0.1",  # multicast
    "239.255.255.250",
    "255.255.255.255",
    "198.18.0.1",  # benchmarking
    "192.0.0.170",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "ff02::1",  # multicast
    "::ffff:127.0.0.1",  # v4-mapped
    "::ffff:169.254.169.254",
    "::ffff:10.1.2.3",
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::7f00:1",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo whose client is 127.0.0.1
]
PUBLIC = ["8.8.8.8", "93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is not None, address


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None, address


def resolver(*addresses: str) -> Any:
    """A getaddrinfo stand-in answering ``addresses`` for every name."""
    asked: list[str] = []

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        asked.append(host)
        family = socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    getaddrinfo.asked = asked  # type: ignore[attr-defined]
    return getaddrinfo


def test_a_name_is_checked_by_every_address_it_resolves_to() -> None:
    policy = Destinations()
    target = policy.check("https://hooks.example/T0/B0/x", resolver("93.184.216.34"))
    assert target.address == "93.184.216.34" and target.host == "hooks.example"
    # one internal address among public ones is enough to refuse (the client may pick it)
    with pytest.raises(InvalidInput, match="not a public address"):
        policy.check("https://hooks.example/x", resolver("93.184.216.34", "10.0.0.7"))
    for url in ("http://127.0.0.1:9/x", "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/"):
        with pytest.raises(InvalidInput):
            policy.check(url, resolver())  # an address literal: nothing to resolve
    with pytest.raises(InvalidInput):
        policy.check("http://localhost:8000/", resolver("127.0.0.1"))


def test_what_the_operator_allows() -> None:
    policy = Destinations.parse("hooks.internal, 127.0.0.1, 10.1.0.0/16, [::1]")
    by_name = policy.check("http://HOOKS.internal/x", resolver("10.9.9.9"))
    assert by_name.address is None  # an allowed name is sent to by name
    assert policy.check("http://127.0.0.1:9/x", resolver()).address == "127.0.0.1"
    assert policy.check("http://[::1]:9/x", resolver()).address == "::1"
    assert policy.check("http://svc/x", resolver("10.1.2.3")).address == "10.1.2.3"
    with pytest.raises(InvalidInput):
        policy.check("http://svc/x", resolver("10.2.0.1"))
    with pytest.raises(ValueError):
        Destinations.parse("10.0.0.0/33")


def test_pinned_requests_keep_the_name() -> None:
    policy = Destinations()
    target = policy.check("https://hooks.example:8443/a/b?c=d", resolver("93.184.216.34"))
    assert target.url == "https://93.184.216.34:8443/a/b?c=d"
    assert target.host_header == "hooks.example:8443"
    assert target.sni == "hooks.example"
    v6 = policy.check("http://v6.example/x", resolver("2606:4700:4700::1111"))
    assert v6.url == "http://[2606:4700:4700::1111]/x" and v6.host_header == "v6.example"


def test_unresolvable_names_and_other_schemes() -> None:
    def fails(*args: Any, **kwargs: Any) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(OSError):
        Destinations().check("https://nowhere.invalid/x", fails)
    for url in ("ftp://hooks.example/x", "file:///etc/passwd", "http:///x"):
        with pytest.raises(InvalidInput):
            Destinations().check(url, resolver("93.184.216.34"))


def test_masks_keep_scheme_and_host_only() -> None:
    assert mask_url("https://hooks.slack.com/services/T0/B0/secret") == (
        "https://hooks.slack.com/…"
    )
    assert mask_url("http://user:pw@hooks.example:8080/x?token=1") == "http://hooks.example:8080/…"
    assert mask_url("https://hooks.example") == "https://hooks.example/…"


@given(st.ip_addresses())
def test_every_address_is_either_public_or_refused_with_a_reason(address: Any) -> None:
    reason = address_refusal(address)
    if reason is None:
        assert address.is_global and not address.is_multicast
    else:
        assert reason
