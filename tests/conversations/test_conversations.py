"""Conversations on pairs and captions: a rejection opens the thread, comments and @mentions notify, the author's
"fixed, please look again" returns the item to review, the home page's unread list, the partials and the API."""

from __future__ import annotations

import pytest

from annotator.captions import services as captions
from annotator.conversations.services import comment_post, item_fixed, unread_comments_for
from annotator.models import Caption, CaptionTask, Comment, Pair
from annotator.picking import services as picking
from subtlebench.errors import Conflict, Forbidden, Invalid
from tests.conftest import make_user
from tests.factories import make_pair, make_video

pytestmark = pytest.mark.django_db

TEXT = "In the second image the red square has moved a little to the right."


def rejected_pair(author, reviewer, reason="The answer does not fit: the cup is on the left.") -> Pair:
    pair = make_pair(status=Pair.Status.SUBMITTED, author=author)
    picking.pair_review(pair=pair, reviewer=reviewer, decision="reject", version=pair.version, reason=reason)
    pair.refresh_from_db()
    return pair


def test_a_rejection_opens_the_thread_with_its_reason_and_tells_the_author(annotator, reviewer):
    pair = rejected_pair(annotator, reviewer)
    [first] = pair.comments.all()
    assert (first.kind, first.author, first.body) == (
        "rejection",
        reviewer,
        "The answer does not fit: the cup is on the left.",
    )
    unread = unread_comments_for(annotator)
    assert unread["total"] == 1
    assert unread["items"][0]["label"] == f"temporal pair {pair.pk}"
    assert unread["items"][0]["url"] == f"/work/videos/{pair.video_id}/?pair={pair.pk}"
    assert unread_comments_for(reviewer)["total"] == 0, "nobody is told of their own comment"


def test_a_mention_tells_that_user_and_lets_them_read_the_thread(annotator, reviewer, client_for):
    lead = make_user("lena", "reviewer")
    helper = make_user("hugo", "annotator")
    pair = rejected_pair(annotator, reviewer)
    comment_post(item=pair, author=annotator, body="Which cup? @rita @hugo, and @nobody-here")
    assert unread_comments_for(reviewer)["total"] == 1  # a participant of the thread
    hugo = unread_comments_for(helper)
    assert hugo["total"] == 1 and hugo["items"][0]["mentioned"] is True
    assert unread_comments_for(lead)["total"] == 0, "a reviewer not in the thread is not told"
    page = client_for(helper).get(f"/talk/pairs/{pair.pk}/")
    assert page.status_code == 200 and "Which cup?" in page.content.decode()
    assert unread_comments_for(helper)["total"] == 0, "reading the thread reads its notices"


def test_fixed_returns_a_rejected_pair_to_review_and_only_its_author_may(annotator, annotator2, reviewer):
    pair = rejected_pair(annotator, reviewer)
    with pytest.raises(Forbidden):
        item_fixed(item=pair, user=annotator2)
    item_fixed(item=pair, user=annotator)
    pair.refresh_from_db()
    assert pair.status == Pair.Status.SUBMITTED
    assert pair in Pair.objects.reviewable_by(reviewer)
    assert [c.kind for c in pair.comments.all()] == ["rejection", "fixed"]
    assert unread_comments_for(reviewer)["total"] == 1
    with pytest.raises(Conflict, match="submitted: only a rejected one"):
        item_fixed(item=pair, user=annotator)


def test_an_empty_or_too_long_comment_is_refused_and_nothing_is_stored(annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    with pytest.raises(Invalid, match="Write something"):
        comment_post(item=pair, author=reviewer, body="   ")
    with pytest.raises(Invalid, match="at most 2000"):
        comment_post(item=pair, author=reviewer, body="x" * 2001)
    assert not Comment.objects.exists()


def test_a_caption_rejection_opens_a_thread_and_fixed_takes_its_slot_back(annotator, reviewer, coordinator):
    pair = make_pair(video=make_video(frames=2))
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[pair.pk])
    task = captions.caption_task_lease(user=annotator)
    caption = captions.caption_submit(task_id=task.pk, user=annotator, text=TEXT, client_key=None)
    captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="reject", reason="Say which square.")
    caption.refresh_from_db()
    assert [(c.kind, c.body) for c in caption.comments.all()] == [("rejection", "Say which square.")]
    assert CaptionTask.objects.get(pk=task.pk).status == CaptionTask.Status.OPEN
    item_fixed(item=caption, user=annotator, body="It is the red one, please look again.")
    caption.refresh_from_db()
    assert caption.status == Caption.Status.SUBMITTED
    assert CaptionTask.objects.get(pk=task.pk).caption_id == caption.pk


def test_the_thread_partial_refuses_others_anonymous_and_wrong_methods(
    client, client_for, annotator, annotator2, reviewer
):
    pair = rejected_pair(annotator, reviewer)
    url = f"/talk/pairs/{pair.pk}/"
    assert client.get(url).status_code == 302
    assert client_for(annotator2).get(url).status_code == 403
    assert client_for(annotator).delete(url).status_code == 405
    assert client_for(annotator).get(f"/talk/pairs/{pair.pk}/post/").status_code == 302  # to the page of forms
    posted = client_for(annotator).post(f"/talk/pairs/{pair.pk}/post/", {"body": "", "step": "comment"})
    assert posted.status_code == 400 and "Write something" in posted.content.decode()
    fixed = client_for(annotator).post(f"/talk/pairs/{pair.pk}/post/", {"body": "", "step": "fixed"})
    assert fixed.status_code == 200 and 'data-status="submitted"' in fixed.content.decode()


def test_the_workbench_panel_shows_the_annotators_threads_on_the_video(client_for, annotator, reviewer):
    pair = rejected_pair(annotator, reviewer, reason="Frame B is blurred.")
    page = client_for(annotator).get(f"/talk/workbench/videos/{pair.video_id}/")
    body = page.content.decode()
    assert page.status_code == 200 and "Frame B is blurred." in body and "Fixed, please look again" in body
    workbench = client_for(annotator).get(f"/work/videos/{pair.video_id}/")
    assert f"/talk/workbench/videos/{pair.video_id}/" in workbench.content.decode()


def test_the_home_page_lists_new_comments(client_for, annotator, reviewer):
    pair = rejected_pair(annotator, reviewer)
    assert "/talk/unread/" in client_for(annotator).get("/").content.decode()
    body = client_for(annotator).get("/talk/unread/").content.decode()
    assert "1 new comment" in body and f"temporal pair {pair.pk}" in body


def test_the_api_reads_posts_and_fixes(client_for, annotator, reviewer):
    pair = rejected_pair(annotator, reviewer)
    api = client_for(annotator)
    thread = api.get(f"/api/pairs/{pair.pk}/comments/").json()
    assert thread["status"] == "rejected" and thread["comments"][0]["kind"] == "rejection"
    posted = api.post(f"/api/pairs/{pair.pk}/comments/", {"body": "On it, @rita"}, content_type="application/json")
    assert posted.status_code == 201 and posted.json()["author"] == "alice"
    fixed = api.post(f"/api/pairs/{pair.pk}/fixed/", {}, content_type="application/json")
    assert fixed.status_code == 200 and fixed.json()["status"] == "submitted"
    again = api.post(f"/api/pairs/{pair.pk}/fixed/", {}, content_type="application/json")
    assert again.status_code == 409
    resolved = client_for(reviewer).post(
        f"/api/comments/{posted.json()['id']}/resolve/", {"resolved": True}, content_type="application/json"
    )
    assert resolved.status_code == 200 and resolved.json()["resolved"]
