"""Who is asking, as the lockout and the throttles see it: the client address behind the configured proxies."""

from __future__ import annotations

from django.conf import settings


def client_ip(request) -> str:
    """REMOTE_ADDR, or with PROXY_COUNT proxies in front, the address the first of them saw (X-Forwarded-For).

    A client can put anything in X-Forwarded-For: only the hops our own proxies appended are believed.
    """
    proxies = settings.REST_FRAMEWORK.get("NUM_PROXIES") or 0
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    return request.META.get("REMOTE_ADDR", "")
