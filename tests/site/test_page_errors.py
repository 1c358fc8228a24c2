"""Errors on pages name no raw field (issue 26): a person reads the message, or the field in words; the API's JSON
bodies keep the field names that clients read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from annotator.captions import services as captions
from annotator.models import Pair
from subtlebench.errors import Conflict, Invalid, error_body, page_detail, page_message
from subtlebench.templatetags.durations import ago, held_for
from tests.factories import make_pair


def test_a_field_message_that_is_a_sentence_is_shown_alone():
    error = Invalid({"text": ["The caption is longer than 400 characters."]})
    assert page_detail(error) == "The caption is longer than 400 characters."
    assert error_body(error)["detail"] == "text: The caption is longer than 400 characters."  # the API's, unchanged
    assert error_body(error)["errors"] == {"text": ["The caption is longer than 400 characters."]}


def test_a_message_that_continues_its_field_gets_the_field_in_words():
    assert page_detail(Invalid({"frames": ["must be at least 1."]})) == "Frames: must be at least 1."
    assert page_message("yt8m_id", "is taken.") == "YouTube-8M id: is taken."
    assert page_message("pair_ids", "none given.") == "Pair ids: none given."
    assert page_message("text", "too long.") == "Caption: too long."


def test_errors_of_no_field_and_other_kinds_read_as_before():
    assert page_detail(Invalid("There are no accepted pairs to caption yet.")) == (
        "There are no accepted pairs to caption yet."
    )
    assert page_detail(Conflict("Someone else decided it.")) == "Someone else decided it."
    both = Invalid({"reason": ["Say why."], "text": ["too long."]})
    assert page_detail(both) == "Reason: Say why. Caption: too long."  # the field in words, never its raw name
    assert page_detail(Invalid({"text": ["The caption is empty."]})) == "The caption is empty."  # named already
    assert page_detail(Invalid({"PROLIFIC_PID": ["Contains NUL (U+0000); remove it."]})) == (
        "PROLIFIC_PID: Contains NUL (U+0000); remove it."  # a parameter of the address keeps its own name
    )


@pytest.mark.django_db
def test_a_refused_caption_shows_its_reason_without_the_field_name(client_for, coordinator, annotator):
    pair = make_pair(status=Pair.Status.ACCEPTED)
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[pair.pk])
    task = captions.caption_task_lease(user=annotator)
    client = client_for(annotator)
    response = client.post(f"/captions/tasks/{task.pk}/submit/", {"text": "  "}, follow=True)
    assert response.redirect_chain[-1][0] == f"/captions/tasks/{task.pk}/"
    html = response.content.decode()
    assert "The caption is empty: describe what changed" in html
    assert "text: " not in html


@pytest.mark.django_db
def test_a_refused_caption_review_flashes_the_message_without_the_field_name(
    client_for, coordinator, annotator, reviewer
):
    pair = make_pair(status=Pair.Status.ACCEPTED)
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[pair.pk])
    task = captions.caption_task_lease(user=annotator)
    caption = captions.caption_submit(
        task_id=task.pk, user=annotator, text="The cup in the second image is a little further to the left."
    )
    response = client_for(reviewer).post(f"/captions/{caption.pk}/review/", {"decision": "reject", "reason": ""})
    assert response.status_code == 302
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert shown == ["Reason: Say why the caption is rejected, so its author can learn from it."]


@pytest.mark.django_db
def test_the_caption_draft_api_body_still_names_the_field(client_for, coordinator, annotator, settings):
    pair = make_pair(status=Pair.Status.ACCEPTED)
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[pair.pk])
    task = captions.caption_task_lease(user=annotator)
    too_long = "x" * (4 * settings.CAPTION_MAX_CHARS + 1)
    response = client_for(annotator).post(
        f"/captions/tasks/{task.pk}/draft/", {"text": too_long}, HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("text: ")
    assert list(response.json()["errors"]) == ["text"]


def test_a_lease_under_a_minute_is_less_than_a_minute_not_0_minutes():
    now = timezone.now()
    assert held_for(now - timedelta(seconds=20), now) == "less than a minute"
    assert held_for(now - timedelta(minutes=3, seconds=5), now) == "3\xa0minutes"
    assert ago(now - timedelta(seconds=5), now) == "less than a minute ago"
    assert held_for(None) == "" and ago(None) == ""
