"""Workers that come back (issue 17): a real worker keeps its task and goes on consuming when Redis drops."""

from __future__ import annotations

import pytest

from subtlebench.celery import app
from tests.conftest import wait_until
from tests.fault_fixtures import start_worker, stop_process

pytestmark = pytest.mark.django_db(transaction=True)


def queue_sleep(broker_url: str, seconds: float, folder, name: str) -> None:
    with app.connection_for_write(broker_url) as connection:
        app.send_task("tests.fault_tasks.sleep_then_mark", args=[seconds, str(folder), name], connection=connection)


def test_a_worker_survives_redis_stopping_with_a_task_in_flight_and_consumes_again_after(
    private_redis, tmp_path, settings
):
    marks = tmp_path / "marks"
    marks.mkdir()
    log = tmp_path / "worker.log"
    worker = start_worker(log, private_redis.url, settings=settings)
    try:
        queue_sleep(private_redis.url, 6, marks, "in_flight")
        wait_until(lambda: (marks / "in_flight.started").exists(), 30, "the task to start")

        private_redis.stop()
        # Down until the worker found it down: on the loss it puts the task in flight back in the queue (Celery's
        # redelivery of a late-acknowledged task, which a Redis back within milliseconds takes, and the task then runs
        # twice), then tries to reconnect. Its first refused reconnect comes after that put-back failed.
        wait_until(lambda: "Cannot connect to" in log.read_text(), 30, "the worker to find the broker down")
        private_redis.start()  # the same port and append-only file: the broker came back
        wait_until(lambda: worker.poll() is not None or log.read_text().count("Connected to") >= 2, 60, "a reconnect")
        assert worker.poll() is None, f"the worker died:\n{log.read_text()[-3000:]}"
        wait_until(lambda: (marks / "in_flight.done").exists(), 30, "the task in flight to end")
        queue_sleep(private_redis.url, 0, marks, "after")
        wait_until(lambda: (marks / "after.done").exists(), 30, "a task queued after the outage to run")

        output = log.read_text()
        assert "Unrecoverable error" not in output, output[-3000:]
        # The task in flight ran once and was acknowledged once Redis was back: Redis will not hand it out again.
        assert (marks / "in_flight.started").read_text() == "started\n"
        wait_until(lambda: private_redis.client().hlen("unacked") == 0, 10, "the ack of the task in flight")
        assert worker.poll() is None
    finally:
        stop_process(worker)
