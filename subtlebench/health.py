"""The parts /healthz reports, each as {"status": "ok" | "degraded" | "down", "detail": ...}.

The plain check asks what the web needs (the database, a broker that takes writes) and stays cheap for load
balancers; the deep one adds beat's last tick, the workers per queue, the media storage and what apps register
(`health_part_register`: the jobs package reports units waiting for the sweeper, and units running on a worker that
looks dead). Only the database and the broker are ever "down" (503); the others are "degraded" at worst: the web
still serves, but work waits.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection, connections

log = logging.getLogger(__name__)

OK, DEGRADED, DOWN = "ok", "degraded", "down"
# Parts whose failure makes /healthz answer 503: the web cannot serve without them.
CRITICAL = ("database", "broker")
EXTRA_PARTS: dict[str, Callable[[set[str] | None], dict]] = {}


def part(status: str, detail: str = "", **extra) -> dict:
    return {"status": status, "detail": detail, **extra}


def health_part_register(name: str, check: Callable[[set[str] | None], dict]) -> None:
    """Add a part to the deep check (an app's AppConfig.ready); `check(answered)` returns a `part(...)`, given the
    names of the workers that answered the deep check's broadcast (None: they could not be asked)."""
    EXTRA_PARTS[name] = check


def first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def database_part() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return part(DOWN, f"unreachable ({first_line(error)})")
    return part(OK)


def answered_within(checks: dict[str, Callable[[], dict]], seconds: float) -> dict[str, dict]:
    """Each check in a thread of its own, all at once; one that has not answered after `seconds` is down.

    A server that accepts connections and never answers (stopped, or behind a route that drops packets) would
    otherwise hold the caller until the client library's own timeouts, if any; a load balancer needs an answer
    now. A check left behind ends by itself on those timeouts (its thread is a daemon and holds no lock)."""
    results: dict[str, dict] = {}

    def run(name: str, check: Callable[[], dict]) -> None:
        try:
            results[name] = check()
        except Exception as error:  # a check that fails unexpectedly is a part that is down, said in words
            results[name] = part(DOWN, f"check failed ({type(error).__name__}: {first_line(error)})")
        finally:
            connections.close_all()  # this thread's own database connection, which nothing else would close

    threads = [
        threading.Thread(target=run, args=item, name=f"healthz-{item[0]}", daemon=True) for item in checks.items()
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    late = part(DOWN, f"no answer within {seconds:g} s")
    return {name: results.get(name, late) for name in checks}


def broker_part() -> dict:
    """A real write, read and delete of a key of its own: a Redis that answers PING but refuses writes (out of
    memory, read-only replica) is down for the broker."""
    import redis

    # Short timeouts: a load balancer's check must not hang on a broker that swallows packets.
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=2, socket_timeout=2)
    key, value = f"healthz:{uuid.uuid4().hex}", uuid.uuid4().hex
    try:
        written, read, _ = client.pipeline(transaction=False).set(key, value, ex=60).get(key).delete(key).execute()
    except redis.RedisError as error:
        reason = "refuses writes" if isinstance(error, redis.ResponseError) else "unreachable"
        # A pipeline's error reads "Command # 1 (SET healthz:...) of pipeline caused error: <Redis's own words>".
        return part(DOWN, f"{reason} ({first_line(error).split('caused error: ', 1)[-1]})")
    finally:
        client.close()
    if not written or (read or b"").decode() != value:
        return part(DOWN, "a key written was not read back")
    return part(OK)


def tick_text(age: float | None) -> str:
    return "never ticked" if age is None else f"last ticked {age:.0f} s ago"


def beat_part() -> dict:
    from subtlebench.models import Tick

    age = Tick.age(Tick.BEAT)
    if age is None or age > settings.BEAT_STALE_SECONDS:
        detail = f"beat {tick_text(age)} (stale after {settings.BEAT_STALE_SECONDS:.0f} s): no sweeps are sent"
        return part(DEGRADED, detail, last_tick_seconds_ago=age)
    return part(OK, f"beat {tick_text(age)}", last_tick_seconds_ago=age)


def expected_queues() -> list[str]:
    queues = {settings.CELERY_TASK_DEFAULT_QUEUE}
    queues.update(route["queue"] for route in settings.CELERY_TASK_ROUTES.values() if "queue" in route)
    return sorted(queues)


def workers_asked(broker: dict) -> dict[str, list[dict]] | str:
    """The replies to a broadcast (worker -> the queues it consumes), or why the workers were not asked."""
    if broker["status"] != OK:
        return "not asked: the broker is down"
    from subtlebench.celery import app

    try:
        return app.control.inspect(timeout=settings.HEALTH_WORKER_TIMEOUT_SECONDS).active_queues() or {}
    except Exception as error:  # kombu raises many kinds for "the broker is away"
        return f"not asked ({type(error).__name__}: {first_line(error)})"


def workers_part(replies: dict[str, list[dict]] | str) -> dict:
    """The workers that answered, per queue they consume; degraded when a queue has none."""
    queues = {name: [] for name in expected_queues()}
    if isinstance(replies, str):
        return part(DEGRADED, replies, queues=queues)
    for worker, consumed in sorted(replies.items()):
        for queue in consumed or []:
            queues.setdefault(queue["name"], []).append(worker)
    empty = [name for name, workers in queues.items() if not workers]
    if empty:
        return part(DEGRADED, f"no worker consumes {', '.join(empty)}", queues=queues)
    return part(OK, f"{len(replies)} worker(s) answered", queues=queues)


def storage_part() -> dict:
    """The media storage: the S3 bucket answers head_bucket, or the local folder takes a file."""
    if settings.S3_BUCKET:
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            endpoint_url=settings.S3_ENDPOINT_URL or None,
            region_name=settings.S3_REGION,
            aws_access_key_id=settings.S3_ACCESS_KEY_ID or None,
            aws_secret_access_key=settings.S3_SECRET_ACCESS_KEY or None,
            config=Config(connect_timeout=2, read_timeout=3, retries={"max_attempts": 1}),
        )
        try:
            client.head_bucket(Bucket=settings.S3_BUCKET)
        except Exception as error:  # botocore: ClientError, EndpointConnectionError, timeouts
            return part(DEGRADED, f"bucket {settings.S3_BUCKET} unreachable ({type(error).__name__})")
        return part(OK, f"bucket {settings.S3_BUCKET}")
    probe = Path(settings.MEDIA_ROOT) / f".healthz-{uuid.uuid4().hex}"
    try:
        probe.parent.mkdir(parents=True, exist_ok=True)  # as the storage makes it on its first file
        probe.write_bytes(b"ok")
        os.unlink(probe)
    except OSError as error:
        return part(DEGRADED, f"media folder not writable ({error.strerror or type(error).__name__})")
    return part(OK, "media folder writable")


def critical_parts() -> dict[str, dict]:
    """The database and the broker, answered within HEALTH_CHECK_TIMEOUT_SECONDS whatever hangs."""
    return answered_within({"database": database_part, "broker": broker_part}, settings.HEALTH_CHECK_TIMEOUT_SECONDS)


def health_parts(*, deep: bool, critical: dict[str, dict] | None = None) -> dict[str, dict]:
    parts = dict(critical or critical_parts())
    if deep:
        database_up = parts["database"]["status"] == OK
        parts["beat"] = beat_part() if database_up else part(DEGRADED, "not known: the database is down")
        replies = workers_asked(parts["broker"])
        parts["workers"] = workers_part(replies)
        answered = None if isinstance(replies, str) else set(replies)
        parts["storage"] = storage_part()
        for name, check in EXTRA_PARTS.items():
            try:
                parts[name] = check(answered) if database_up else part(DEGRADED, "not known: the database is down")
            except Exception as error:  # a report that fails says so; the other parts still answer
                parts[name] = part(DEGRADED, f"check failed ({type(error).__name__}: {first_line(error)})")
    return parts


def overall(parts: dict[str, dict]) -> str:
    if any(parts[name]["status"] == DOWN for name in CRITICAL if name in parts):
        return DOWN
    return OK if all(p["status"] == OK for p in parts.values()) else DEGRADED


def health_log(parts: dict[str, dict]) -> None:
    """Log each part that is not ok (the deep check: an operator's or a monitor's call, not every LB probe)."""
    for name, state in parts.items():
        if state["status"] != OK:
            log.warning("health: %s %s: %s", name, state["status"], state["detail"])
