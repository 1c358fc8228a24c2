"""Who is asking, as the lockout and the throttles see it (the client address behind the configured proxies), and
server paths kept from users who are not coordinators."""

from __future__ import annotations

import re

from django.conf import settings

# An absolute path with at least one folder (/data/imports/a/clip.mp4) or an s3:// URI: its folders are dropped.
PATH = re.compile(r"(?:s3://|(?<![\w.~:/])/)(?:[^\s/'\"]+/)+([^\s/'\"]*)")


def without_server_paths(text: str) -> str:
    """'/data/imports/clip.mp4: not a video' -> 'clip.mp4: not a video'."""
    return PATH.sub(lambda match: match.group(1), text)


def job_without_server_paths(job) -> None:
    """Shorten the paths in a job's errors and result, in memory (for a page or an answer, never saved)."""
    job.errors = [without_server_paths(str(error)) for error in job.errors]
    if isinstance(job.result, dict):
        job.result = {
            key: without_server_paths(value) if isinstance(value, str) else value for key, value in job.result.items()
        }
    pause = getattr(job, "pause", None)  # the unit that waits out an outage: its reason names the storage's address
    if pause is not None:
        pause.error = without_server_paths(pause.error)


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
