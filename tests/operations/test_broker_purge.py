"""Each real Celery worker a test starts finds its broker empty (`broker_purge`, tests/conftest.py): a message an
earlier test (or run) queued on any of the app's queues, or that a stopped worker left unacknowledged, never reaches
it. A stale embedding message once reached a later test's worker and failed that test's embedding job."""

from __future__ import annotations

import json

from annotator.jobs.broker import broker_client, broker_task_ids, transport_option
from subtlebench.celery import app
from tests.conftest import broker_purge


def test_a_worker_starts_on_an_empty_broker_whatever_earlier_tests_queued():
    names = ["annotator.tasks.sample_video", "annotator.tasks.embed_video_frames", "annotator.tasks.mine_pairs"]
    sent = {app.send_task(name, kwargs={"job_id": 1, "unit_id": 1}).id for name in names}
    client = broker_client()
    try:  # a message a worker took and never acknowledged, as kombu keeps it
        client.hset(
            transport_option("unacked_key"), "tag-1", json.dumps([{"headers": {"id": "taken-1"}}, "", "default"])
        )
        client.zadd(transport_option("unacked_index_key"), {"tag-1": 0})
    finally:
        client.close()
    queues = {"default", "similarity"}
    assert sent | {"taken-1"} <= broker_task_ids(queues)

    broker_purge()
    assert broker_task_ids(queues) == set()
