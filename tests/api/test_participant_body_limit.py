"""The participant API, open to anyone with a link, takes a small body only: a larger one is refused with a 413 by
its declared length, before it is read or parsed, and a small one is answered as before."""

from __future__ import annotations

import json

import pytest

from evaluation.models import Assignment
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.evaluation.studies.test_evaluation import make_pool, ready_participant

pytestmark = pytest.mark.django_db


def test_it_refuses_a_body_over_the_limit_with_a_413_and_records_nothing(client, settings):
    settings.PARTICIPANT_API_MAX_BODY_BYTES = 4096
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    participant = ready_participant(study)
    assignment = participation.participant_next_item(participant=participant)
    url = f"/api/p/{participant.token}/item/{assignment.token}/answer/"
    padded = json.dumps({"option": 1, "client_key": "k", "pad": "x" * 10 * 1024**2})

    big = client.post(url, padded, content_type="application/json")

    assert big.status_code == 413
    assert big.json() == {
        "detail": f"The request body is {len(padded)} bytes; this endpoint takes at most 4096.",
        "errors": {},
    }
    assert Assignment.objects.answered().count() == 0
    assert client.get(f"/api/p/{participant.token}/item/", data=None, CONTENT_LENGTH="5000").status_code == 413
    small = client.post(url, {"option": 1}, content_type="application/json")
    assert (small.status_code, small.json()) == (200, {"recorded": True})
