"""The Celery application: Redis broker, tasks discovered in each workflow package's tasks.py.

Also the Redis transport the app uses (settings CELERY_BROKER_TRANSPORT), with which a worker survives losing
Redis while a task is in flight, and beat's scheduler (settings CELERY_BEAT_SCHEDULER), which records beat's ticks.
A worker or beat checks the database and the broker before it starts, and refuses to start on one that does not
answer (the web process does the same in subtlebench/wsgi.py).
"""

from __future__ import annotations

import logging
import os
import time

from celery import Celery, signals
from celery.beat import PersistentScheduler
from kombu.transport import redis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")

# Workflow packages with a tasks.py. Task names stay `annotator.tasks.*` (routes and queued messages use them).
TASK_PACKAGES = [
    "annotator.videos",
    "annotator.similarity",
    "annotator.export",
    "annotator.jobs",
    "annotator.cleanup",
    "annotator.datamanager",
    "evaluation.runs",
    "annotator.collections",
    "annotator.mining",
    "annotator.synthetic",
    "annotator.editing",
]


class RedisChannel(redis.Channel):
    """kombu's Redis channel, which keeps the broker's address after its connection was lost.

    When a worker loses Redis, Celery `collect()`s the connection, which drops the transport's broker address
    (`transport.client = None`), and then closes it. The channel of a task in flight still has work to do through
    that transport: put the unacknowledged message back on close, and acknowledge it when the task ends. Without
    an address both raised `AttributeError: 'NoneType' object has no attribute 'hostname'`, which is not a
    connection error, so the worker's main process died ("Unrecoverable error"). With it, the close fails as a
    connection error (ignored: the message stays in Redis's unacked set), and the ack reaches Redis once it is back.
    """

    def __init__(self, connection, *args, **kwargs):
        self.broker = connection.client
        super().__init__(connection, *args, **kwargs)

    def _connparams(self, asynchronous=False):
        if self.connection.client is None:
            self.connection.client = self.broker
        return super()._connparams(asynchronous=asynchronous)


class RedisTransport(redis.Transport):
    Channel = RedisChannel


class BeatScheduler(PersistentScheduler):
    """Celery beat's default scheduler, which also records that beat is alive (subtlebench.models.Tick "beat") at
    most every BEAT_TICK_SECONDS, waking at least that often to do so. /healthz and the jobs page read the tick: a
    beat that is down sends no sweep, so pending units would wait with nothing said."""

    recorded_at = 0.0

    def tick(self, *args, **kwargs):
        from django.conf import settings

        interval = super().tick(*args, **kwargs)
        if time.monotonic() - self.recorded_at >= settings.BEAT_TICK_SECONDS:
            self.recorded_at = time.monotonic()
            beat_tick_record()
        return min(interval, settings.BEAT_TICK_SECONDS)


def beat_tick_record() -> None:
    """Record beat's tick; a database that is away is logged, never fatal to beat (it ticks again later)."""
    from django.db import DatabaseError, close_old_connections, connection

    from subtlebench.models import Tick

    close_old_connections()
    try:
        Tick.record(Tick.BEAT)
    except DatabaseError as error:
        logging.getLogger(__name__).warning("beat's tick not recorded: the database is away (%s)", error)
        connection.close()


app = Celery("subtlebench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(TASK_PACKAGES)


class StartRefused(RuntimeError):
    """The database or the broker does not answer as a process starts; the message names the setting."""


def start_check(process: str) -> None:
    """Raise StartRefused, naming the setting, when the database or the broker does not answer: a process with a
    wrong DATABASE_URL would otherwise say "ready", take tasks from the queue (or requests) and fail every one."""
    from django.conf import settings
    from django.db import connections

    from subtlebench.health import OK, critical_parts

    parts = critical_parts()
    connections.close_all()  # nothing opened here may be inherited by the worker's forked processes
    database = settings.DATABASES["default"]
    where = {
        "database": (
            "DATABASE_URL",
            f"{database['HOST'] or 'localhost'}:{database['PORT'] or 5432}/{database['NAME']}",
        ),
        "broker": ("CELERY_BROKER_URL", broker_address(settings.CELERY_BROKER_URL)),
    }
    failed = [name for name in ("database", "broker") if parts[name]["status"] != OK]
    if failed:
        lines = [f"{name} at {where[name][1]} ({where[name][0]}): {parts[name]['detail']}" for name in failed]
        message = f"{process} refuses to start: " + "; ".join(lines)
        logging.getLogger(__name__).critical(message)
        raise StartRefused(message)


def broker_address(url: str) -> str:
    """host:port/db of a Redis URL, without its password."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    return f"{parsed.hostname or 'localhost'}:{parsed.port or 6379}{parsed.path or ''}"


def start_check_or_exit(process: str) -> None:
    # Celery's signals log an Exception of a receiver and go on starting: SystemExit stops the process, with the line.
    try:
        start_check(process)
    except StartRefused as refused:
        raise SystemExit(str(refused)) from None


@signals.worker_init.connect
def worker_start_check(**kwargs) -> None:
    start_check_or_exit("the worker")


@signals.beat_init.connect
def beat_start_check(**kwargs) -> None:
    start_check_or_exit("beat")
