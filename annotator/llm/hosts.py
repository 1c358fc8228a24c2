"""Which hosts a model endpoint may reach. With MODEL_ENDPOINT_HOSTS set, only those host names; empty, any host
whose every address is public (loopback, private, link-local, shared, reserved and multicast addresses refused).
The check is made at registration and again for every connection, which then goes to the address just checked,
so a name that resolves elsewhere later (DNS rebinding) reaches nothing."""

from __future__ import annotations

import ipaddress
import socket

from django.conf import settings


class HostRefused(Exception):
    """The host is not one a model endpoint may reach; the message says why, without probing further."""


# IPv6 forms that carry an IPv4 address, or lead to one through a translator or a tunnel, whose v4 half Python's
# is_global does not look at: refused outright, whatever they embed (no public host is reached only this way).
_REFUSED_V6 = tuple(
    ipaddress.ip_network(network)
    for network in (
        "::/96",  # IPv4-compatible ::a.b.c.d (deprecated), :: and ::1 with it
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT)
        "64:ff9b:1::/48",  # NAT64 for local use
        "2001::/32",  # Teredo: the client's v4 address is hidden in it
        "fec0::/10",  # site-local (deprecated)
    )
)
# The well-known NAT64 prefix: a DNS64 resolver answers public v4 hosts with it, so only its v4 half decides.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) or 6to4 (2002:aabb:ccdd::) address
    reaches."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in _REFUSED_V6):
            return False
        embedded = _embedded_v4(ip)
        if embedded is not None and not (embedded.is_global and not embedded.is_multicast):
            return False
    return ip.is_global and not ip.is_multicast


def endpoint_addresses(host: str, port: int) -> list[tuple]:
    """getaddrinfo's answers for a host an endpoint may reach, to connect to exactly these; HostRefused otherwise."""
    name = (host or "").lower().rstrip(".")
    allowed = settings.MODEL_ENDPOINT_HOSTS
    if allowed and name not in allowed:
        raise HostRefused(f"the host {host} is not one of MODEL_ENDPOINT_HOSTS")
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise HostRefused(f"the host name {host} does not resolve") from None
    if not infos:
        raise HostRefused(f"the host name {host} does not resolve")
    if not allowed and not all(_public(info[4][0]) for info in infos):
        raise HostRefused(
            f"the host {host} has a loopback, private, link-local or reserved address; the operator may allow it "
            "by name in MODEL_ENDPOINT_HOSTS"
        )
    return infos


def pinned_connection(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None):
    """socket.create_connection for http.client, to the checked addresses only (HTTPS still checks the name)."""
    host, port = address
    last = None
    for family, kind, proto, _, sockaddr in endpoint_addresses(host, port):
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as error:
            sock.close()
            last = error
    raise last


def check_endpoint_host(host: str, port: int) -> None:
    """At registration: a host of MODEL_ENDPOINT_HOSTS (the operator's word, not resolved now), or, with none set,
    a name whose every address is public."""
    if settings.MODEL_ENDPOINT_HOSTS:
        if (host or "").lower().rstrip(".") not in settings.MODEL_ENDPOINT_HOSTS:
            raise HostRefused(f"the host {host} is not one of MODEL_ENDPOINT_HOSTS")
        return
    endpoint_addresses(host, port)
