"""The cache backend: Django's Redis cache, failing open. The cache holds nothing that must be kept (throttle
counts, served-image bytes), so when Redis is away or refuses writes (out of memory) a read misses and a write is
dropped, and the request goes on against the database.

A failure is logged once (per process and thread: Django keeps a cache object per thread); for CACHE_RETRY_SECONDS
after it the cache is not asked at all (a Redis that swallows packets must not add its socket timeout to every
request), then it is tried again and its return is logged.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache

log = logging.getLogger(__name__)


class FailOpenRedisCache(RedisCache):
    """RedisCache whose reads miss and writes are dropped while Redis fails (see the module docstring)."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self._failed_at: float | None = None  # when the last failure was (time.monotonic), None while it answers

    def _call(self, method: str, fallback, *args, **kwargs):
        if self._failed_at is not None and time.monotonic() - self._failed_at < settings.CACHE_RETRY_SECONDS:
            return fallback
        try:
            value = getattr(super(), method)(*args, **kwargs)
        except Exception as error:  # redis raises ConnectionError, TimeoutError, ResponseError (OOM), ...
            if self._failed_at is None:
                log.warning(
                    "cache unavailable (%s: %s): reads miss and writes are dropped (throttles let requests through) "
                    "until it answers again; asked again every %s s",
                    type(error).__name__,
                    str(error).splitlines()[0] if str(error) else "",
                    settings.CACHE_RETRY_SECONDS,
                )
            self._failed_at = time.monotonic()
            return fallback
        if self._failed_at is not None:
            log.warning("cache available again")
            self._failed_at = None
        return value

    def get(self, key, default=None, version=None):
        return self._call("get", default, key, default, version)

    def get_many(self, keys, version=None):
        return self._call("get_many", {}, keys, version)

    def has_key(self, key, version=None):
        return self._call("has_key", False, key, version)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("add", False, key, value, timeout, version)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        self._call("set", None, key, value, timeout, version)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("set_many", list(data), data, timeout, version)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("touch", False, key, timeout, version)

    def delete(self, key, version=None):
        return self._call("delete", False, key, version)

    def delete_many(self, keys, version=None):
        self._call("delete_many", None, keys, version)
