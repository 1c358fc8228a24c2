"""The public-host check of model endpoints (annotator/llm/hosts.py) on every IPv6 form that reaches an IPv4 address
or a private network: a host name that resolves to one is refused, at registration and at each connection."""

from __future__ import annotations

import socket

import pytest

from annotator.llm.hosts import HostRefused, check_endpoint_host, endpoint_addresses

REFUSED = [
    "::ffff:10.0.0.5",  # IPv4-mapped, private
    "::ffff:127.0.0.1",  # IPv4-mapped, loopback
    "::ffff:169.254.169.254",  # IPv4-mapped, the cloud metadata address
    "64:ff9b::10.0.0.5",  # NAT64 well-known prefix, private v4 behind it
    "64:ff9b::127.0.0.1",
    "64:ff9b::169.254.169.254",
    "64:ff9b:1::a00:5",  # NAT64 for local use
    "::10.0.0.5",  # IPv4-compatible (deprecated)
    "::8.8.8.8",  # IPv4-compatible, even with a public v4
    "::127.0.0.1",
    "::ffff:0:a00:5",  # IPv4-translated (SIIT)
    "2002:a00:5::1",  # 6to4 of 10.0.0.5
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "fec0::1",  # site-local
    "fc00::1",  # unique local
    "fd12:3456::1",
    "fe80::1",  # link-local
    "fe80::1%eth0",
    "::1",
    "::",
    "ff02::1",  # multicast
    "100::1",  # discard-only
]
ALLOWED = ["2606:4700:4700::1111", "2a00:1450:4001:82b::200e", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "8.8.8.8"]


def resolving_to(monkeypatch, address: str) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sockaddr = (address, 443, 0, 0) if family == socket.AF_INET6 else (address, 443)
    monkeypatch.setattr(
        "annotator.llm.hosts.socket.getaddrinfo",
        lambda host, port, *args, **kwargs: [(family, socket.SOCK_STREAM, 6, "", sockaddr)],
    )


@pytest.mark.parametrize("address", REFUSED)
def test_it_refuses_a_host_that_resolves_to_an_ipv6_form_of_a_private_or_embedded_address(
    monkeypatch, settings, address
):
    settings.MODEL_ENDPOINT_HOSTS = []
    resolving_to(monkeypatch, address)
    with pytest.raises(HostRefused, match="loopback, private, link-local or reserved"):
        check_endpoint_host("models.example.org", 443)
    with pytest.raises(HostRefused):
        endpoint_addresses("models.example.org", 443)


@pytest.mark.parametrize("address", ALLOWED)
def test_it_lets_a_public_address_through_in_any_form(monkeypatch, settings, address):
    settings.MODEL_ENDPOINT_HOSTS = []
    resolving_to(monkeypatch, address)
    check_endpoint_host("models.example.org", 443)
    assert endpoint_addresses("models.example.org", 443)[0][4][0] == address
