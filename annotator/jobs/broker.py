"""What the broker holds: the ids of the task messages in Celery's Redis transport, so the sweeper tells a unit whose
message was lost (Redis flushed, or restarted without its data) from one whose message only waits.

kombu's Redis transport (kombu/transport/redis.py) keeps a queue's messages in a list named after the queue, one
list per priority step but the lowest (`<queue><sep><step>`, sep "\\x06\\x16", steps 0 3 6 9), and a message a
worker received but has not acknowledged in the hash `unacked` (delivery tag -> [message, exchange, routing key]),
indexed by the sorted set `unacked_index`. The transport options may rename these or prefix every key
(`global_keyprefix`); they are read from CELERY_BROKER_TRANSPORT_OPTIONS as the transport reads them. A message is
a JSON object whose `headers.id` (task protocol 2) or `properties.correlation_id` is the Celery task id.
"""

from __future__ import annotations

import json

from django.conf import settings

# A key the sweeper keeps in the broker: gone means the broker lost its data since the last sweep (or never saw one).
MARKER_KEY = "subtlebench:sweeper-marker"
READ_CHUNK = 1000


def transport_option(name: str):
    from kombu.transport.redis import Channel

    return settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(name, getattr(Channel, name)) or ""


def queue_keys(queue: str) -> list[str]:
    """The Redis lists that hold a queue's messages, one per priority step."""
    sep = transport_option("sep")
    return [queue if step == 0 else f"{queue}{sep}{step}" for step in transport_option("priority_steps")]


def message_task_id(raw) -> str:
    try:
        message = json.loads(raw)
    except (TypeError, ValueError):
        return ""
    if isinstance(message, list):  # an `unacked` entry: [message, exchange, routing key]
        message = message[0] if message and isinstance(message[0], dict) else {}
    if not isinstance(message, dict):
        return ""
    headers = message.get("headers") or {}
    properties = message.get("properties") or {}
    return str(headers.get("id") or properties.get("correlation_id") or "")


def broker_client():
    import redis

    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=3, socket_timeout=10)


def broker_marker_lost() -> bool:
    """Whether the sweeper's marker key was gone from the broker (it is set again here): the broker lost its data
    since the last sweep, or this is the first sweep on it. Raises redis.RedisError when the broker cannot be read."""
    client = broker_client()
    try:
        return bool(client.set(transport_option("global_keyprefix") + MARKER_KEY, "1", nx=True))
    finally:
        client.close()


def broker_task_ids(queues: set[str]) -> set[str]:
    """Every task id the broker holds in these queues (each priority list) and in the unacknowledged hash. Raises
    redis.RedisError when the broker cannot be read."""
    prefix = transport_option("global_keyprefix")
    client = broker_client()
    ids = set()
    try:
        for queue in sorted(queues):
            for key in queue_keys(queue):
                # From the head, in chunks: a message pushed meanwhile shifts the rest (read twice, harmless); one a
                # worker pops leaves from the tail, so none is skipped.
                start = 0
                while chunk := client.lrange(prefix + key, start, start + READ_CHUNK - 1):
                    ids.update(message_task_id(raw) for raw in chunk)
                    start += READ_CHUNK
        for _, raw in client.hscan_iter(prefix + transport_option("unacked_key"), count=READ_CHUNK):
            ids.add(message_task_id(raw))
    finally:
        client.close()
    ids.discard("")
    return ids


def task_queue(name: str) -> str:
    """The queue a task of this name is sent to (CELERY_TASK_ROUTES, else the default queue)."""
    from subtlebench.celery import app

    route = app.amqp.router.route({}, name)
    return route["queue"].name if "queue" in route else settings.CELERY_TASK_DEFAULT_QUEUE
