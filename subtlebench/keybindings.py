"""The operator's binding of model key variables to hosts (MODEL_KEY_BINDINGS): a key read from the worker's
environment is sent only to a host the operator bound its variable to, so whoever registers an endpoint chooses
among the operator's keys for a host, never where a key goes. Parsed once at start (settings), matched per request."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HOST_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*")
DEFAULT_PORTS = {"http": 80, "https": 443}

# A host the key may reach: its name (lower case, IP addresses in their standard form) and its port (None: any).
Binding = tuple[str, "int | None"]


def normal_host(host: str) -> str:
    """A host as bindings compare it: lower case, without a final dot; an IP address in its standard form."""
    name = (host or "").strip().lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return name


def parse_binding_host(text: str) -> Binding:
    """`host`, `host:port`, `[v6]` or `[v6]:port`; ValueError says what is wrong."""
    text = text.strip()
    if "/" in text:
        raise ValueError("a host (name or address, and a port if it must be that one), not a URL")
    port_text = ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("an IPv6 address in brackets is not closed")
        host, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError("after ] comes :port or nothing")
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv6 address") from None
    elif text.count(":") > 1:
        raise ValueError("write an IPv6 address in brackets, e.g. [2001:db8::1]:8000")
    else:
        host, _, port_text = text.partition(":")
        if ":" in text and not port_text:
            raise ValueError("a ':' without a port")
        if not HOST_NAME.fullmatch(normal_host(host)):
            raise ValueError(f"{host!r} is not a host name")
    port = None
    if port_text or text.endswith(":"):
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"the port {port_text!r} is not a number from 1 to 65535")
        port = int(port_text)
    return normal_host(host), port


def parse_binding_entry(entry: str, prefix: str) -> tuple[str, Binding]:
    """`VARIABLE=host[:port]`: the variable and its host; ValueError says what is wrong."""
    name, equals, host = entry.partition("=")
    if not equals or not name or not host:
        raise ValueError("is not VARIABLE=host[:port]")
    if not ENV_NAME.fullmatch(name):
        raise ValueError(f"names {name!r}, which is not an environment variable's name")
    if not name.startswith(prefix) or name == prefix:
        raise ValueError(f"names {name}, which is not MODEL_API_KEY_ENV_PREFIX ({prefix}) followed by a name")
    try:
        return name, parse_binding_host(host)
    except ValueError as error:
        raise ValueError(f"has a bad host: {error}") from None


def parse_key_bindings(text: str, prefix: str) -> dict[str, tuple[Binding, ...]]:
    """MODEL_KEY_BINDINGS: entries `VARIABLE=host[:port]` separated by commas or spaces (a variable bound to several
    hosts is named once per host). ImproperlyConfigured names the first bad entry."""
    bindings: dict[str, list[Binding]] = {}
    for entry in (text or "").replace(",", " ").split():
        try:
            name, binding = parse_binding_entry(entry, prefix)
        except ValueError as error:
            raise ImproperlyConfigured(
                f"MODEL_KEY_BINDINGS: the entry {entry!r} {error}. Each entry is VARIABLE=host[:port], e.g. "
                f"{prefix}OPENAI=api.openai.com,{prefix}GATEWAY=gw.example.org:443."
            ) from None
        if binding not in bindings.setdefault(name, []):
            bindings[name].append(binding)
    return {name: tuple(hosts) for name, hosts in bindings.items()}


def url_host(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL, the port filled in from the scheme; ("", "", 0) when it has no host."""
    try:
        parts = urlsplit((url or "").strip())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    except ValueError:
        return "", "", 0
    if not parts.hostname:
        return "", "", 0
    return parts.scheme, normal_host(parts.hostname), port


def binding_allows(bindings: tuple[Binding, ...], host: str, port: int) -> bool:
    host = normal_host(host)
    return any(bound == host and bound_port in (None, port) for bound, bound_port in bindings)


def describe_host(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port is not None else shown


def describe_bindings(bindings: tuple[Binding, ...]) -> str:
    return ", ".join(describe_host(host, port) for host, port in bindings) or "no host"
