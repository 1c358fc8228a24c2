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


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
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
