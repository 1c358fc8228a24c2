"""Nothing thrown away by accident (issue 14, part 3), for captions: a skip can be undone, a decision reopened with
a reason (history kept), and a draft save based on an older version never writes over a newer one."""

from __future__ import annotations

import pytest

from annotator.authoring.drafts import DraftChanged
from annotator.captions import services as captions
from annotator.models import Caption, CaptionReview, CaptionSkip, CaptionTask
from subtlebench.errors import Forbidden, Invalid
from tests.factories import make_pair

pytestmark = pytest.mark.django_db
TEXT = "In the second image the red square has moved to the right edge."


@pytest.fixture
def task(coordinator, annotator):
    pair = make_pair(author=coordinator)
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[pair.pk])
    return captions.caption_task_lease(user=annotator)


def test_a_caption_skip_undone_offers_the_task_again(client_for, annotator, annotator2, task):
    skip = captions.caption_task_skip(task_id=task.pk, user=annotator, reason="No visible difference")
    assert captions.caption_task_lease(user=annotator) is None
    with pytest.raises(Forbidden):
        captions.caption_skip_undo(skip_id=skip.pk, user=annotator2)
    client = client_for(annotator)
    page = client.get("/captions/work/").content.decode()
    assert "No visible difference" in page and f"/captions/skips/{skip.pk}/undo/" in page
    response = client.post(f"/captions/skips/{skip.pk}/undo/", follow=True)
    assert "is offered to you again" in response.content.decode()
    assert not CaptionSkip.objects.exists()
    assert captions.caption_task_lease(user=annotator) == task


def test_the_caption_skip_undo_api(client_for, annotator, annotator2, task):
    skip = captions.caption_task_skip(task_id=task.pk, user=annotator, reason="Several differences")
    assert client_for(annotator2).get("/api/captions/skips/").json() == []
    assert client_for(annotator2).post(f"/api/captions/skips/{skip.pk}/undo/").status_code == 403
    listed = client_for(annotator).get("/api/captions/skips/").json()
    assert [(s["id"], s["task"], s["reason"]) for s in listed] == [(skip.pk, task.pk, "Several differences")]
    response = client_for(annotator).post(f"/api/captions/skips/{skip.pk}/undo/")
    assert response.status_code == 200 and response.json() == {"task": task.pk, "status": "open"}


def test_a_reopened_caption_waits_for_review_again_and_the_export_loses_it(annotator, reviewer, coordinator, task):
    caption = captions.caption_submit(task_id=task.pk, user=annotator, text=TEXT)
    captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="accept")
    assert Caption.objects.exported().filter(pk=caption.pk).exists()
    with pytest.raises(Invalid):
        captions.caption_reopen(caption_id=caption.pk, by=reviewer, reason="")
    from tests.conftest import make_user

    with pytest.raises(Forbidden):
        captions.caption_reopen(caption_id=caption.pk, by=make_user("ray", "reviewer"), reason="Mine now.")

    captions.caption_reopen(caption_id=caption.pk, by=reviewer, reason="It names the wrong colour.")

    caption.refresh_from_db()
    assert (caption.status, caption.chosen) == (Caption.Status.SUBMITTED, False)
    assert not Caption.objects.exported().exists()
    assert captions.caption_next_for_review(reviewer) == caption
    history = list(caption.reviews.values_list("decision", "reviewer__username", "reason"))
    assert history == [("reopen", "rita", "It names the wrong colour."), ("accept", "rita", "")]


def test_a_reopened_rejection_takes_its_task_back_if_nobody_took_it(annotator, reviewer, coordinator, task):
    caption = captions.caption_submit(task_id=task.pk, user=annotator, text=TEXT)
    captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="reject", reason="Too vague.")
    assert CaptionTask.objects.get(pk=task.pk).status == CaptionTask.Status.OPEN
    captions.caption_reopen(caption_id=caption.pk, by=coordinator, reason="It is precise enough.")
    task.refresh_from_db()
    assert (task.status, task.caption_id) == (CaptionTask.Status.DONE, caption.pk)
    assert CaptionReview.objects.filter(decision="reopen", reviewer=coordinator).count() == 1


def test_the_caption_reopen_api_and_page(client_for, annotator, reviewer, task):
    caption = captions.caption_submit(task_id=task.pk, user=annotator, text=TEXT)
    captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="accept")
    assert client_for(annotator).post(f"/api/captions/{caption.pk}/reopen/", {"reason": "x"}).status_code == 403
    client = client_for(reviewer)
    assert f"/captions/{caption.pk}/reopen/" in client.get("/captions/review/").content.decode()
    response = client.post(
        f"/api/captions/{caption.pk}/reopen/", {"reason": "Second look."}, content_type="application/json"
    )
    assert response.status_code == 200 and response.json()["status"] == "submitted"
    again = client.post(f"/captions/{caption.pk}/reopen/", {"reason": "Twice."}, follow=True)
    assert "only a decided caption can be reopened" in again.content.decode()


def test_a_caption_draft_save_from_an_older_version_is_refused_unless_it_is_the_same_text(annotator, task):
    first = captions.caption_draft_save(task_id=task.pk, user=annotator, text="old text", version=0)
    old_version = first.draft_version
    newer = captions.caption_draft_save(task_id=task.pk, user=annotator, text="new text", version=old_version)
    with pytest.raises(DraftChanged):
        captions.caption_draft_save(task_id=task.pk, user=annotator, text="old text", version=old_version)
    same = captions.caption_draft_save(task_id=task.pk, user=annotator, text="new text", version=old_version)
    assert same.draft_version == newer.draft_version
    assert Caption.objects.get(task=task).text == "new text"
