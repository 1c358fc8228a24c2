"""Throttles of the endpoints that need no login (participants of studies): per client address, counted in the
cache (Redis, shared by every web process), at the rates of REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]. The cache
fails open (subtlebench.cache): with Redis down or out of memory every request is let through, never refused."""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from subtlebench.security import client_ip


class ParticipantThrottle(SimpleRateThrottle):
    """Answers and item fetches of one participant's browser (or anyone probing participant tokens)."""

    scope = "participant"

    def get_rate(self):
        # The rates as configured now: DRF's own lookup keeps the dict it saw at import (tests change the rates).
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": client_ip(request)}


class ParticipantJoinThrottle(ParticipantThrottle):
    """Joining through a study's open link: each join makes a participant row, so far fewer per address."""

    scope = "participant_join"


def throttle_wait(throttle_class, request) -> float | None:
    """For a plain Django view: None when the request is allowed, else the seconds to wait (for Retry-After)."""
    throttle = throttle_class()
    if throttle.allow_request(request, None):
        return None
    return throttle.wait() or 1.0
