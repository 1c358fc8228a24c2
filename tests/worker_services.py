"""Under pytest-xdist, each worker gets a Redis database of its own for the broker and the cache, so that no
worker's purge, queue or cache key reaches another's (and the Celery workers a test starts inherit it). Each worker
has its own test database already (pytest-django adds the worker id to its name), its own media folder (every
test's tmp_path) and its own ports (bound to port 0).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16


def redis_url_for_worker(url: str, worker: int) -> str:
    """The Redis URL's database number moved up by the worker's number: redis://h:p/1 is /1 for gw0, /2 for gw1."""
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) + worker
    if database >= REDIS_DATABASES:
        raise RuntimeError(
            f"{url}: worker {worker} would need Redis database {database}, and Redis has {REDIS_DATABASES}. "
            "Run fewer workers (-n) or start from a lower database number."
        )
    return urlunsplit(parts._replace(path=f"/{database}"))


def worker_number() -> int | None:
    worker = os.getenv("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) if worker.startswith("gw") else None


def isolate_worker() -> None:
    """Point this xdist worker's broker and cache at its own Redis database, before anything connected: in the
    settings, in the Celery app's configuration and in the environment that worker processes inherit."""
    worker = worker_number()
    if worker is None:
        return
    from django.conf import settings

    from subtlebench.celery import app

    broker = redis_url_for_worker(settings.CELERY_BROKER_URL, worker)
    settings.CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"] = app.conf.broker_url = broker
    cache = settings.CACHES["default"]
    if cache["BACKEND"].endswith("RedisCache"):
        cache["LOCATION"] = os.environ["CACHE_URL"] = redis_url_for_worker(cache["LOCATION"], worker)
