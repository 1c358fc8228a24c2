"""The coordinator's overview in daily use (issue 26): its Held now count is the leases Who holds what lists, the
assignment picker offers the videos that can be assigned, and a refused assignment comes back to its form."""

from __future__ import annotations

import pytest

from annotator.captions import services as captions
from annotator.models import Pair, Video, VideoSkip
from annotator.picking import services as picking
from tests.factories import make_pair, make_video

pytestmark = pytest.mark.django_db


def hold_a_video_and_a_caption_task(coordinator, annotator, annotator2):
    video = make_video(frames=2, yt8m_id="held-video")
    assert picking.video_lease_next(user=annotator).pk == video.pk
    pair = make_pair(status=Pair.Status.ACCEPTED)
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[pair.pk])
    task = captions.caption_task_lease(user=annotator2)
    assert task is not None
    return video, task


def test_held_now_counts_every_lease_who_holds_what_lists(client_for, coordinator, annotator, annotator2):
    video, task = hold_a_video_and_a_caption_task(coordinator, annotator, annotator2)
    response = client_for(coordinator).get("/overview/")
    assert response.context["held"] == {"all": 2, "videos": 1, "captions": 1}
    listed = [lease for person in response.context["holdings"] for lease in person["leases"]]
    assert len(listed) == response.context["held"]["all"]
    html = response.content.decode()
    assert task.title in html and f"caption task {task.pk}" not in html and "held-video" in html
    assert "1 video, 1 caption task" in html
    assert "for less than a minute" in html and "for 0\xa0minutes" not in html


def test_the_picker_offers_sampled_videos_not_flagged_bad(client_for, coordinator, annotator):
    offered = make_video(frames=2, yt8m_id="offer-me")
    flagged = make_video(frames=2, yt8m_id="flagged-bad")
    VideoSkip.objects.create(video=flagged, user=annotator, reason=VideoSkip.Reason.BAD_VIDEO)
    Video.objects.filter(pk=make_video(frames=0, yt8m_id="not-sampled").pk).update(status=Video.Status.PENDING)
    response = client_for(coordinator).get("/overview/")
    assert [video.yt8m_id for video in response.context["assignable"]] == [offered.yt8m_id]
    assert '<option value="offer-me">' in response.content.decode()


def test_a_refused_assignment_comes_back_to_its_form_with_what_was_typed(client_for, coordinator, annotator):
    client = client_for(coordinator)
    response = client.post("/overview/assign/", {"video": "no-such-id", "user": annotator.pk})
    assert response.status_code == 302 and response["Location"] == "/overview/"
    page = client.get("/overview/")
    html = page.content.decode()
    form = html[html.index('id="overview-assign"') : html.index("</form>", html.index('id="overview-assign"'))]
    assert "No video has the YouTube-8M id &#x27;no-such-id&#x27;: pick one from the list." in form
    assert 'value="no-such-id"' in form and "autofocus" in form
    assert f'<option value="{annotator.pk}" selected>' in form
    assert "no-such-id" not in html[: html.index('id="overview-assign"')]  # not at the top of the page
    assert "autofocus" not in client.get("/overview/").content.decode()  # shown once: a reload is a clean form


def test_an_assignment_with_no_video_says_to_pick_one(client_for, coordinator):
    client = client_for(coordinator)
    client.post("/overview/assign/", {"video": " ", "user": ""})
    assert "Type or pick the YouTube-8M id" in client.get("/overview/").content.decode()


def test_a_picked_video_is_assigned(client_for, coordinator, annotator):
    video = make_video(frames=2, yt8m_id="pick-me")
    response = client_for(coordinator).post("/overview/assign/", {"video": "pick-me", "user": annotator.pk})
    assert response.status_code == 302 and response["Location"] == "/overview/"
    assert Video.objects.get(pk=video.pk).assigned_to == annotator
