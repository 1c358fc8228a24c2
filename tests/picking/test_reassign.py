"""Reassigning a video someone holds: the coordinator confirms first (told who holds it and how old their draft
is), the holder's heartbeat and saves answer that the lease is gone, and their draft goes with the video."""

from __future__ import annotations

import pytest

from annotator.models import PairDraft, Video, VideoHandover
from annotator.picking import services as picking
from tests.factories import make_video

pytestmark = pytest.mark.django_db

STATE = {"question": "Which image was taken later?", "category": "temporal"}


@pytest.fixture
def held(annotator):
    video = make_video(frames=3, yt8m_id="held-one")
    picking.video_heartbeat(video=video, user=annotator)
    PairDraft.objects.create(video=video, author=annotator, state=STATE, version=5)
    return video


def test_reassigning_a_held_video_asks_first_naming_the_holder_and_the_draft_age(
    held, annotator, annotator2, coordinator
):
    with pytest.raises(picking.ReassignUnconfirmed) as refused:
        picking.video_assign(video=held, user=annotator2, by=coordinator, confirmed=False)
    assert "alice holds video held-one" in refused.value.detail
    assert "their draft was saved less than a minute ago" in refused.value.detail
    video = Video.objects.get(pk=held.pk)
    assert video.assigned_to is None and video.lease_holder_id == annotator.pk, "nothing changed"
    assert not VideoHandover.objects.exists()


def test_a_confirmed_reassign_tells_the_holder_and_hands_the_draft_over(
    client_for, held, annotator, annotator2, coordinator
):
    picking.video_assign(video=held, user=annotator2, by=coordinator, confirmed=True)
    handover = VideoHandover.objects.get()
    assert (handover.from_user, handover.to_user, handover.by) == (annotator, annotator2, coordinator)
    client = client_for(annotator)
    beat = client.post(f"/api/videos/{held.pk}/heartbeat/")
    assert beat.status_code == 409
    assert beat.json()["errors"]["lease"] == ["reassigned"]
    assert "cora gave video held-one to bob" in beat.json()["detail"]
    save = client.put(
        f"/api/videos/{held.pk}/draft/", {"state": {"question": "late"}, "version": 5}, content_type="application/json"
    )
    assert save.status_code == 409 and save.json()["errors"]["lease"] == ["reassigned"]
    assert PairDraft.objects.get(video=held, author=annotator).state == STATE, "the refused save wrote nothing"
    opened = client_for(annotator2).get(f"/api/videos/{held.pk}/draft/").json()
    assert opened["state"] == STATE, "the new holder opens the draft"
    assert picking.video_lease_next(user=annotator2).pk == held.pk


def test_the_video_page_asks_and_reassigns_once_confirmed(client_for, held, annotator2, coordinator):
    client = client_for(coordinator)
    asked = client.post(f"/videos/{held.pk}/assign/", {"user": annotator2.pk})
    assert asked.status_code == 409
    body = asked.content.decode()
    assert 'id="reassign-confirm"' in body and "alice holds video held-one" in body and "Reassign to bob" in body
    assert Video.objects.get(pk=held.pk).assigned_to is None
    done = client.post(f"/videos/{held.pk}/assign/", {"user": annotator2.pk, "confirm": "1"})
    assert done.status_code == 302
    assert Video.objects.get(pk=held.pk).assigned_to == annotator2


def test_the_api_refuses_an_unconfirmed_reassign_with_a_conflict(client_for, held, annotator2, coordinator):
    client = client_for(coordinator)
    refused = client.post(f"/api/videos/{held.pk}/assign/", {"username": "bob"}, content_type="application/json")
    assert refused.status_code == 409 and "alice holds video held-one" in refused.json()["detail"]
    done = client.post(
        f"/api/videos/{held.pk}/assign/", {"username": "bob", "confirm": True}, content_type="application/json"
    )
    assert done.status_code == 200 and done.json()["assigned_to"] == "bob"


def test_assigning_a_free_video_asks_nothing(annotator2, coordinator):
    video = make_video(frames=2, yt8m_id="free-one")
    picking.video_assign(video=video, user=annotator2, by=coordinator, confirmed=False)
    assert Video.objects.get(pk=video.pk).assigned_to == annotator2
