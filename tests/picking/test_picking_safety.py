"""Nothing thrown away by accident (issue 14, part 3), for pairs: a skip can be undone, an annotator can withdraw an
unreviewed pair, a reviewer or coordinator can reopen a decision with a reason, and a draft save based on an older
version never writes over a newer one."""

from __future__ import annotations

import pytest

from annotator.authoring.drafts import work_draft_save
from annotator.models import Pair, PairDraft, Review, VideoSkip
from annotator.picking import services as picking
from evaluation.studies import services as studies
from subtlebench.errors import Conflict, Forbidden, Invalid
from tests.factories import make_pair, make_video
from tests.picking.test_picking import bulk_video, submit

pytestmark = pytest.mark.django_db


def skipped_video(user, reason=VideoSkip.Reason.NO_PAIR):
    video = picking.video_lease_next(user=user)
    skip = picking.video_release(video=video, user=user, reason=reason)
    return video, skip


# --- Skip undo ------------------------------------------------------------------------------------------------


def test_it_offers_a_skipped_video_again_after_undo(annotator):
    bulk_video(3)
    video, skip = skipped_video(annotator)
    assert not picking.videos_open_to(annotator).filter(pk=video.pk).exists()
    assert picking.video_lease_next(user=annotator) is None  # the only video: skipped, nothing else offered

    picking.video_skip_undo(skip_id=skip.pk, user=annotator)

    assert not VideoSkip.objects.exists()
    assert picking.video_lease_next(user=annotator) == video


def test_it_lets_nobody_else_undo_a_skip_but_a_coordinator(annotator, annotator2, coordinator):
    bulk_video(3)
    video, skip = skipped_video(annotator, VideoSkip.Reason.BAD_VIDEO)
    with pytest.raises(Forbidden):
        picking.video_skip_undo(skip_id=skip.pk, user=annotator2)
    assert VideoSkip.objects.filter(pk=skip.pk).exists()
    picking.video_skip_undo(skip_id=skip.pk, user=coordinator)
    assert picking.videos_open_to(annotator2).filter(pk=video.pk).exists()  # flagged for everyone: unflagged now


def test_the_skip_undo_api_answers_the_video_and_404_for_a_gone_skip(client_for, annotator, annotator2):
    video = bulk_video(3)
    client = client_for(annotator)
    client.post("/api/work/lease/")
    released = client.post(f"/api/videos/{video.pk}/release/", {"reason": "no_pair", "note": "static shot"})
    skip = VideoSkip.objects.get()
    assert released.json() == {"video": video.pk, "reason": "no_pair", "skip": skip.pk}
    listed = client.get("/api/skips/").json()
    assert [(s["id"], s["yt8m_id"], s["reason"], s["note"]) for s in listed] == [
        (skip.pk, video.yt8m_id, "no_pair", "static shot")
    ]
    assert client_for(annotator2).get("/api/skips/").json() == []
    client = client_for(annotator)
    response = client.post(f"/api/skips/{skip.pk}/undo/")
    assert response.status_code == 200
    assert response.json() == {"video": video.pk, "yt8m_id": video.yt8m_id}
    again = client.post(f"/api/skips/{skip.pk}/undo/")
    assert again.status_code == 404
    assert "undone already" in again.json()["detail"]


def test_the_work_page_lists_skips_and_its_undo_button_works(client_for, annotator):
    bulk_video(3)
    video, skip = skipped_video(annotator)
    client = client_for(annotator)
    page = client.get("/work/").content.decode()
    assert 'id="skipped"' in page and video.yt8m_id in page and "no usable pair" in page
    assert f"/work/skips/{skip.pk}/undo/" in page
    response = client.post(f"/work/skips/{skip.pk}/undo/", follow=True)
    assert response.redirect_chain[-1][0] == "/work/"
    assert "is offered to you again" in response.content.decode()
    assert not VideoSkip.objects.exists()


def test_the_skip_undo_page_refuses_a_get_and_another_annotators_skip(client, client_for, annotator, annotator2):
    bulk_video(3)
    _, skip = skipped_video(annotator)
    assert client.post(f"/work/skips/{skip.pk}/undo/").status_code == 302  # anonymous: to the login page
    assert VideoSkip.objects.exists()
    other = client_for(annotator2)
    assert other.get(f"/work/skips/{skip.pk}/undo/")["Location"] == "/work/"  # a GET undoes nothing: to the page
    response = other.post(f"/work/skips/{skip.pk}/undo/", follow=True)
    assert "is another annotator" in response.content.decode()
    assert VideoSkip.objects.filter(pk=skip.pk).exists()


# --- Withdraw ---------------------------------------------------------------------------------------------------


def test_it_withdraws_an_unreviewed_pair_keeps_the_record_and_frees_its_frames(annotator):
    video = bulk_video(4)
    picking.video_lease_next(user=annotator)
    pair, _ = submit(annotator, video, key="first-key-1")

    withdrawn = picking.pair_withdraw(pair=pair, user=annotator)

    assert withdrawn.status == Pair.Status.WITHDRAWN
    assert Pair.objects.filter(pk=pair.pk, status=Pair.Status.WITHDRAWN).exists()  # kept
    assert not Pair.objects.awaiting_review().filter(pk=pair.pk).exists()
    again, created = submit(annotator, video, key="second-key-2")  # the same frames and category
    assert created and again.pk != pair.pk and again.status == Pair.Status.SUBMITTED


def test_it_withdraws_only_your_own_pair_and_only_before_a_decision(annotator, annotator2, reviewer):
    mine = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    with pytest.raises(Forbidden):
        picking.pair_withdraw(pair=mine, user=annotator2)
    picking.pair_review(pair=mine, reviewer=reviewer, decision="accept", version=mine.version)
    with pytest.raises(Conflict, match="only a submitted pair waiting for review"):
        picking.pair_withdraw(pair=mine, user=annotator)
    assert Pair.objects.get(pk=mine.pk).status == Pair.Status.ACCEPTED


def test_a_withdrawn_pair_is_never_exported_sampled_or_counted(annotator):
    kept = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    picking.pair_withdraw(pair=kept, user=annotator)
    assert not Pair.objects.exportable().filter(pk=kept.pk).exists()
    assert not Pair.objects.accepted().filter(pk=kept.pk).exists()  # the pool studies sample from
    figures = picking.overview_figures()
    assert figures["totals"] == {"in_benchmark": 0, "held_back": 0, "submitted": 0, "rejected": 0}
    assert figures["people"] == []
    with pytest.raises(Invalid):
        studies.study_create(name="No pairs", fraction=1.0, practice_count=0)


def test_the_withdraw_api_and_page(client_for, annotator, annotator2):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    assert client_for(annotator2).post(f"/api/pairs/{pair.pk}/withdraw/").status_code == 403
    client = client_for(annotator)
    page = client.get("/work/").content.decode()
    assert f"/work/pairs/{pair.pk}/withdraw/" in page
    response = client.post(f"/api/pairs/{pair.pk}/withdraw/")
    assert response.status_code == 200 and response.json()["status"] == "withdrawn"
    second = client.post(f"/work/pairs/{pair.pk}/withdraw/", follow=True)
    assert "only a submitted pair waiting for review can be withdrawn" in second.content.decode()


# --- Reopen -----------------------------------------------------------------------------------------------------


def test_the_reviewer_who_decided_reopens_with_a_reason_and_the_history_keeps_it(annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    picking.pair_review(pair=pair, reviewer=reviewer, decision="accept", version=pair.version)
    with pytest.raises(Invalid, match="Say why"):
        picking.pair_reopen(pair=pair, by=reviewer, reason="  ")
    assert Pair.objects.get(pk=pair.pk).status == Pair.Status.ACCEPTED

    picking.pair_reopen(pair=pair, by=reviewer, reason="The lamp also moved: two differences.")

    pair.refresh_from_db()
    assert pair.status == Pair.Status.SUBMITTED and pair.decided_at is None
    assert Pair.objects.reviewable_by(reviewer).filter(pk=pair.pk).exists()
    history = list(pair.reviews.values_list("decision", "reviewer__username", "reason"))
    assert history == [
        ("reopen", "rita", "The lamp also moved: two differences."),
        ("accept", "rita", ""),
    ]
    assert not Pair.objects.exportable().filter(pk=pair.pk).exists()
    # Decided again, as any submitted pair; the overview counts decisions, not reopenings.
    picking.pair_review(pair=pair, reviewer=reviewer, decision="reject", version=pair.version, reason="Two changes.")
    person = picking.overview_figures()["people"][0]
    assert (person["accepted"], person["rejected"]) == (1, 1)


def test_only_the_deciding_reviewer_or_a_coordinator_may_reopen(annotator, reviewer, coordinator):
    from tests.conftest import make_user

    other_reviewer = make_user("ray", "reviewer")
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    picking.pair_review(pair=pair, reviewer=reviewer, decision="reject", version=pair.version, reason="Blurry.")
    for who in (other_reviewer, annotator):
        with pytest.raises(Forbidden):
            picking.pair_reopen(pair=pair, by=who, reason="I disagree.")
    assert Pair.objects.get(pk=pair.pk).status == Pair.Status.REJECTED
    picking.pair_reopen(pair=pair, by=coordinator, reason="Not blurry at full size.")
    assert Pair.objects.get(pk=pair.pk).status == Pair.Status.SUBMITTED
    with pytest.raises(Conflict, match="only an accepted or rejected pair"):
        picking.pair_reopen(pair=pair, by=coordinator, reason="Twice.")
    assert Review.objects.filter(decision=Review.Decision.REOPEN).count() == 1


def test_reopen_is_not_a_review_decision(annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    with pytest.raises(Invalid):
        picking.pair_review(pair=pair, reviewer=reviewer, decision="reopen", version=pair.version)
    assert Pair.objects.get(pk=pair.pk).status == Pair.Status.SUBMITTED


def test_the_reopen_api_needs_a_reason_and_the_review_page_shows_the_form(client_for, annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    picking.pair_review(pair=pair, reviewer=reviewer, decision="accept", version=pair.version)
    client = client_for(reviewer)
    page = client.get(f"/review/pairs/{pair.pk}/").content.decode()
    assert 'id="reopen-form"' in page
    refused = client.post(f"/api/pairs/{pair.pk}/reopen/", {"reason": ""}, content_type="application/json")
    assert refused.status_code == 400 and "reason" in refused.json()["errors"]
    response = client.post(f"/review/pairs/{pair.pk}/reopen/", {"reason": "Second look."}, follow=True)
    assert response.redirect_chain[-1][0] == f"/review/pairs/{pair.pk}/"
    body = response.content.decode()
    assert "waiting for review again" in body and "Second look." in body
    assert 'id="reopen-form"' not in body  # submitted again: nothing to reopen


# --- Draft versions ---------------------------------------------------------------------------------------------


def test_a_draft_save_based_on_an_older_version_never_writes_over_a_newer_one(annotator):
    video = make_video(frames=2)
    first = work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "old"}, version=0)
    newer = work_draft_save(
        picking.VIDEOS, item=video, user=annotator, state={"question": "new"}, version=first.version
    )
    from annotator.authoring.drafts import DraftChanged

    with pytest.raises(DraftChanged):
        work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "old"}, version=first.version)
    assert PairDraft.objects.get().state == {"question": "new"}
    # The same newest state arriving late with the older version (a pagehide save after the reloaded page saved it
    # from the browser's copy) is no conflict and changes nothing.
    same = work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "new"}, version=first.version)
    assert (same.version, PairDraft.objects.get().version) == (newer.version, newer.version)


def test_the_pagehide_beacon_saves_the_draft_as_a_form_post_with_the_csrf_token_in_its_body(annotator):
    """sendBeacon sets no headers: the workbench's draft address takes a form post whose body carries the CSRF
    token, the state as JSON and the version it was based on, with the same compare-and-set as the draft API."""
    import json

    from django.test import Client

    video = make_video(frames=2)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(annotator)
    browser.get(f"/work/videos/{video.pk}/")  # sets the CSRF cookie, as the page does
    token = browser.cookies["csrftoken"].value
    address = f"/work/videos/{video.pk}/draft/"
    assert browser.post(address, {"state": json.dumps({"question": "a"}), "version": "0"}).status_code == 403
    saved = browser.post(
        address, {"state": json.dumps({"question": "a"}), "version": "0", "csrfmiddlewaretoken": token}
    )
    assert saved.status_code == 200 and PairDraft.objects.get().state == {"question": "a"}
    version = saved.json()["version"]
    newer = work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "b"}, version=version)
    late = browser.post(
        address, {"state": json.dumps({"question": "a"}), "version": str(version), "csrfmiddlewaretoken": token}
    )
    assert late.status_code == 409 and PairDraft.objects.get().state == {"question": "b"}  # nothing older wins
    assert PairDraft.objects.get().version == newer.version
    bad = browser.post(address, {"state": "{not json", "csrfmiddlewaretoken": token})
    assert bad.status_code == 400 and "JSON object" in bad.content.decode()
