"""Participants keep working when the cache fails (issue 25): with the cache's Redis out of memory or stopped, the
open link's pages, the join, the item, its images and the answers all work against the database; the throttles
let requests through instead of answering 500 or 503."""

from __future__ import annotations

import logging
import re

import pytest
import redis
from django.test import Client

from annotator.models import Category
from evaluation.models import Participant
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.factories import DESKTOP_WINDOW, make_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def cache_redis(private_redis, settings):
    """The cache (and the broker, for /healthz) on a Redis of this test's own."""
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": private_redis.url}}
    settings.CELERY_BROKER_URL = private_redis.url
    return private_redis


def out_of_memory(server) -> None:
    """Redis over a 1 MB maxmemory with noeviction: every write is refused with an OOM error (an empty Redis uses
    about 0.9 MB: 300 KB of ballast first, so the limit holds however its buffers move)."""
    client = server.client()
    client.mset({f"ballast:{number}": b"x" * 1000 for number in range(300)})
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", "1mb")
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set("probe", "1")
    assert client.ping()  # up, reads answer: only writes are refused


def open_study():
    for number in range(3):
        make_pair(category=(Category.TEMPORAL, Category.STATE, Category.ACTION)[number])
    return studies.study_create(name="S", fraction=1, practice_count=0, open_cap=10)


def take_part_through_the_open_link(study) -> tuple[Participant, int]:
    """Arrive, join, and answer every item through the participant API (with its images): the participant and how
    many answers were recorded."""
    browser = Client()
    assert browser.get(f"/p/open/{study.open_token}/").status_code == 200
    joined = browser.post(
        f"/p/open/{study.open_token}/consent/", {"agree": "yes", "PROLIFIC_PID": "p1", **DESKTOP_WINDOW}
    )
    assert joined.status_code == 302, joined.content[:500]
    participant = study.participants.get()
    while (practice := participation.participant_next_practice(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=practice.token, position=1)
    recorded = 0
    while not (item := browser.get(f"/api/p/{participant.token}/item/").json())["done"]:
        for url in item["images"]:
            image = browser.get(re.sub(r"^https?://[^/]+", "", url))
            assert image.status_code == 200 and image.content[:2] == b"\xff\xd8"
        answer = browser.post(
            f"/api/p/{participant.token}/item/{item['item']}/answer/", {"option": 1}, content_type="application/json"
        )
        assert answer.status_code == 200, answer.content
        recorded += answer.json()["recorded"]
    assert item["completion_code"] == study.completion_code
    return participant, recorded


def test_with_the_cache_out_of_memory_participants_join_and_answer_and_healthz_names_the_broker(cache_redis):
    study = open_study()
    out_of_memory(cache_redis)
    participant, recorded = take_part_through_the_open_link(study)
    assert recorded == 3
    assert participant.assignments.filter(answered_at__isnull=False).count() == 3
    health = Client().get("/healthz")
    assert health.status_code == 503
    assert health.json()["parts"]["broker"]["status"] == "down"
    assert health.json()["parts"]["database"]["status"] == "ok"


def test_with_the_cache_stopped_participants_join_and_answer(cache_redis):
    study = open_study()
    cache_redis.stop()
    participant, recorded = take_part_through_the_open_link(study)
    assert recorded == 3
    assert participant.assignments.filter(answered_at__isnull=False).count() == 3


def test_the_throttles_count_again_once_the_cache_is_back_and_the_outage_is_logged_once(cache_redis, settings, caplog):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "participant_join": "2/min"},
    }
    settings.CACHE_RETRY_SECONDS = 0
    study = open_study()
    cache_redis.stop()
    with caplog.at_level(logging.WARNING, logger="subtlebench.cache"):
        assert [Client().get(f"/p/open/{study.open_token}/").status_code for _ in range(4)] == [200] * 4
        cache_redis.start()
        assert [Client().get(f"/p/open/{study.open_token}/").status_code for _ in range(3)] == [200, 200, 429]
    messages = [record.getMessage() for record in caplog.records if record.name == "subtlebench.cache"]
    assert len(messages) == 2, messages  # once when it failed (not once per request), once when it was back
    assert messages[0].startswith("cache unavailable (ConnectionError") and messages[1] == "cache available again"
