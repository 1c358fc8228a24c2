"""Bulk actions of the data manager with a preview and an undo: the preview's counts and sample, a confirm refused
when the selection changed since, and the undo of every bulk action, each item restored exactly (every column of
its row, the rows the action created gone), with the items changed since kept and named."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from annotator.datamanager.bulk import SelectionChanged, bulk_start
from annotator.datamanager.preview import bulk_preview
from annotator.datamanager.undo import bulk_undo
from annotator.models import (
    BulkAction,
    CaptionBatch,
    CaptionTask,
    ImageEmbedding,
    Job,
    Pair,
    PairCandidate,
    Review,
    Video,
)
from annotator.picking import services as picking
from annotator.similarity.services import current_fingerprint, vector_bytes
from subtlebench.errors import Conflict, Forbidden
from subtlebench.tokens import api_token_create
from tests.datamanager.test_data_manager import run_job
from tests.factories import make_candidate, make_pair, make_video


def rows(model, ids) -> list[dict]:
    """Every column of the rows, as stored: what "restored exactly" compares."""
    return list(model.objects.filter(pk__in=ids).order_by("pk").values())


def embed(image, vector) -> None:
    ImageEmbedding.objects.create(
        image=image, fingerprint=current_fingerprint(), vector=vector_bytes(np.asarray(vector)), dim=len(vector)
    )


# --- Undo, for every bulk action -----------------------------------------------------------------------------------


def setup_accept(coordinator, annotator, annotator2):
    return "pairs", [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(3)], {}


def setup_reject(coordinator, annotator, annotator2):
    return "pairs", [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(3)], {"reason": "blurry"}


def setup_reopen(coordinator, annotator, annotator2):
    pairs = [make_pair(author=annotator), make_pair(status=Pair.Status.REJECTED, author=annotator)]
    return "pairs", pairs, {"reason": "second look"}


def setup_caption_batch(coordinator, annotator, annotator2):
    batch = CaptionBatch.objects.create(title="B", selection="list", created_by=coordinator, captions_per_item=2)
    return "pairs", [make_pair(author=annotator) for _ in range(2)], {"target": str(batch.pk)}


def setup_exclude(coordinator, annotator, annotator2):
    return "pairs", [make_pair(author=annotator) for _ in range(3)], {}


def setup_include(coordinator, annotator, annotator2):
    pairs = [make_pair(author=annotator) for _ in range(3)]
    Pair.objects.filter(pk__in=[p.pk for p in pairs]).update(excluded_from_studies=True)
    return "pairs", pairs, {}


def setup_rescore(coordinator, annotator, annotator2):
    pairs = [make_pair(author=annotator, similarity=0.1, similarity_model="old") for _ in range(2)]
    for pair in pairs:
        embed(pair.image_1, [1.0, 0.0, 0.0, 0.0])
        embed(pair.image_2, [0.9, 0.1, 0.0, 0.0])
    return "pairs", pairs, {}


def setup_assign(coordinator, annotator, annotator2):
    videos = [make_video(frames=2) for _ in range(3)]
    picking.video_heartbeat(video=videos[0], user=annotator2)  # bob's lease, which the assign to alice ends
    picking.video_assign(video=videos[1], user=annotator2, by=coordinator)
    return "videos", videos, {"target": "alice"}


def setup_release(coordinator, annotator, annotator2):
    videos = [make_video(frames=2) for _ in range(2)]
    picking.video_heartbeat(video=videos[0], user=annotator)
    picking.video_heartbeat(video=videos[1], user=annotator2)
    return "videos", videos, {}


def setup_dismiss(coordinator, annotator, annotator2):
    return "candidates", [make_candidate() for _ in range(3)], {}


SETUPS = {
    "accept": setup_accept,
    "reject": setup_reject,
    "reopen": setup_reopen,
    "caption_batch": setup_caption_batch,
    "exclude": setup_exclude,
    "include": setup_include,
    "rescore": setup_rescore,
    "assign": setup_assign,
    "release": setup_release,
    "dismiss": setup_dismiss,
}
MODELS = {"pairs": Pair, "videos": Video, "candidates": PairCandidate}


def test_every_bulk_action_has_an_undo_test():
    from annotator.datamanager.bulk import ACTIONS

    assert {name for actions in ACTIONS.values() for name in actions} == set(SETUPS)


@pytest.mark.parametrize("action", list(SETUPS))
def test_undo_restores_each_item_exactly(action, coordinator, annotator, annotator2):
    table, items, options = SETUPS[action](coordinator, annotator, annotator2)
    model, ids = MODELS[table], [item.pk for item in items]
    before = rows(model, ids)
    reviews, tasks = set(Review.objects.values_list("pk", flat=True)), CaptionTask.objects.count()
    job = run_job(bulk_start(table=table, action=action, by=coordinator, ids=ids, **options))
    assert job.result["ok"] == len(ids), job.errors
    # The action changed the items (adding to a caption batch changes no column of a pair: it adds their tasks).
    assert rows(model, ids) != before or CaptionTask.objects.count() == tasks + 2 * len(ids)
    report = bulk_undo(job=job, by=coordinator)
    assert report == {"restored": len(ids), "kept": [], "kept_count": 0}
    assert rows(model, ids) == before
    assert set(Review.objects.values_list("pk", flat=True)) == reviews  # the action's reviews are gone
    assert CaptionTask.objects.count() == tasks
    with pytest.raises(Conflict, match="undone already, by cora"):
        bulk_undo(job=job, by=coordinator)


def test_undo_keeps_an_item_changed_since_and_restores_the_rest(coordinator, annotator, reviewer):
    pairs = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(3)]
    before = rows(Pair, [p.pk for p in pairs])
    job = run_job(bulk_start(table="pairs", action="accept", by=coordinator, ids=[p.pk for p in pairs]))
    changed = pairs[1]
    picking.pair_reopen(pair=changed, by=coordinator, reason="a closer look")  # after the action: now submitted
    kept_state = rows(Pair, [changed.pk])
    report = bulk_undo(job=job, by=coordinator)
    assert report["restored"] == 2 and report["kept_count"] == 1
    assert report["kept"] == [
        {"id": changed.pk, "why": "changed since the action: status is now 'submitted', decided_at is now None"}
    ]
    assert rows(Pair, [pairs[0].pk, pairs[2].pk]) == [before[0], before[2]]
    assert rows(Pair, [changed.pk]) == kept_state  # left as the later change made it
    assert list(Review.objects.filter(pair=changed).values_list("decision", flat=True)) == ["reopen", "accept"]
    action = BulkAction.objects.get(job=job)
    assert action.undone_by == coordinator and action.undo_report == report


def test_undo_keeps_a_caption_task_taken_up_since(coordinator, annotator):
    batch = CaptionBatch.objects.create(title="B", selection="list", created_by=coordinator, captions_per_item=1)
    pairs = [make_pair(author=annotator) for _ in range(2)]
    job = run_job(
        bulk_start(table="pairs", action="caption_batch", by=coordinator, ids=[p.pk for p in pairs], target=batch.pk)
    )
    CaptionTask.objects.filter(pair=pairs[0]).update(lease_holder=annotator, lease_expires=timezone.now())
    report = bulk_undo(job=job, by=coordinator)
    assert report["restored"] == 1 and report["kept"] == [
        {"id": pairs[0].pk, "why": "its caption task was taken up since"}
    ]
    assert list(CaptionTask.objects.values_list("pair_id", flat=True)) == [pairs[0].pk]


def test_undo_is_refused_while_running_after_its_time_and_to_a_non_coordinator(
    coordinator, annotator, reviewer, settings
):
    pairs = [make_pair(author=annotator) for _ in range(2)]
    job = bulk_start(table="pairs", action="exclude", by=coordinator, ids=[p.pk for p in pairs])
    with pytest.raises(Conflict, match="still running"):
        bulk_undo(job=job, by=coordinator)
    job = run_job(job)
    with pytest.raises(Forbidden):
        bulk_undo(job=job, by=reviewer)
    BulkAction.objects.filter(job=job).update(undo_until=timezone.now() - timedelta(seconds=1))
    with pytest.raises(Conflict, match="can no longer be undone"):
        bulk_undo(job=job, by=coordinator)
    assert Pair.objects.filter(excluded_from_studies=True).count() == 2


def test_undo_of_many_items_takes_a_fixed_number_of_queries(coordinator, annotator, django_assert_max_num_queries):
    pairs = [make_pair(author=annotator) for _ in range(4)]
    video = pairs[0].video
    many = pairs + [make_pair(author=annotator, video=video, source_id=f"v_{n}") for n in range(150)]
    ids = [p.pk for p in many]
    before = rows(Pair, ids)
    job = run_job(bulk_start(table="pairs", action="exclude", by=coordinator, ids=ids))
    with django_assert_max_num_queries(14):
        report = bulk_undo(job=job, by=coordinator)
    assert report["restored"] == len(ids) and rows(Pair, ids) == before


# --- Preview and confirm -------------------------------------------------------------------------------------------


def test_the_preview_counts_what_changes_and_samples_the_first_ten(coordinator, annotator):
    waiting = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(12)]
    done = [make_pair(author=annotator) for _ in range(3)]
    low = make_pair(status=Pair.Status.SUBMITTED, author=annotator, similarity=0.5)
    shown = bulk_preview(table="pairs", action="accept", by=coordinator, filter={})
    assert (shown["count"], shown["will_change"], shown["stays"]) == (16, 12, 4)
    assert (
        "Similarity 0.500 is below"
        in bulk_preview(table="pairs", action="accept", by=coordinator, ids=[low.pk])["sample"][0]["stays"]
    )
    assert [row["id"] for row in shown["sample"]] == sorted(p.pk for p in (*waiting, *done))[:10]
    assert shown["sample"][0]["now"] == "submitted" and shown["sample"][0]["after"] == "accepted"
    only_done = bulk_preview(table="pairs", action="accept", by=coordinator, ids=[done[0].pk])
    assert only_done["will_change"] == 0 and "only a submitted pair is reviewed" in only_done["sample"][0]["stays"]
    assert not Job.objects.exists() and Pair.objects.filter(status="accepted").count() == 3  # nothing ran


def test_a_confirm_whose_selection_changed_since_the_preview_is_refused(coordinator, annotator):
    pairs = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(3)]
    shown = bulk_preview(table="pairs", action="accept", by=coordinator, filter={"status": "submitted"})
    expect = {"count": shown["count"], "digest": shown["digest"]}
    make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    with pytest.raises(SelectionChanged, match="the preview covered 3 pairs, it covers 4 now"):
        bulk_start(table="pairs", action="accept", by=coordinator, filter={"status": "submitted"}, expect=expect)
    Pair.objects.filter(pk=pairs[0].pk).update(status=Pair.Status.WITHDRAWN)  # 3 again, not the same 3
    with pytest.raises(SelectionChanged, match="still covers 3 pairs, but not the same ones"):
        bulk_start(table="pairs", action="accept", by=coordinator, filter={"status": "submitted"}, expect=expect)
    assert not Job.objects.exists()


def test_the_page_previews_then_confirms_then_undoes(client_for, coordinator, annotator):
    pairs = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(2)]
    before = rows(Pair, [p.pk for p in pairs])
    client = client_for(coordinator)
    form = {"scope": "matching", "filter": "status=submitted", "action": "accept", "idempotency_key": "k1"}
    preview = client.post("/tables/pairs/bulk/", form)
    html = preview.content.decode()
    assert preview.status_code == 200 and 'id="bulk-confirm"' in html and not Job.objects.exists()
    assert '<strong class="dm-will">2</strong> will change' in html
    digest = bulk_preview(table="pairs", action="accept", by=coordinator, filter={"status": "submitted"})["digest"]
    confirm = {**form, "confirm": "yes", "expect_count": "2", "expect_digest": digest}
    make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    refused = client.post("/tables/pairs/bulk/", confirm)
    assert refused.status_code == 409 and "The selection changed since the preview" in refused.content.decode()
    assert not Job.objects.exists()
    Pair.objects.exclude(pk__in=[p.pk for p in pairs]).delete()  # the selection is the previewed one again
    started = client.post("/tables/pairs/bulk/", confirm)
    job = Job.objects.get(kind=Job.Kind.BULK)
    assert started.status_code == 302 and started["Location"] == f"/jobs/{job.pk}/"
    run_job(job)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="undo-button"' in page and "<strong>2</strong> pairs changed" in page
    assert 'id="recent-undo"' in client.get("/tables/pairs/").content.decode()
    undone = client.post(f"/tables/bulk/{job.pk}/undo/", follow=True).content.decode()
    assert "Undone: 2 restored" in undone and 'id="undo-restored">2<' in undone
    assert rows(Pair, [p.pk for p in pairs]) == before
    assert 'id="bulk-recent"' not in client.get("/tables/pairs/").content.decode()


def test_the_undo_address_is_for_coordinators_and_posts(client, client_for, coordinator, reviewer, annotator):
    job = run_job(bulk_start(table="pairs", action="exclude", by=coordinator, ids=[make_pair(author=annotator).pk]))
    url = f"/tables/bulk/{job.pk}/undo/"
    assert client.post(url).status_code == 302 and "/login" in client.post(url)["Location"]
    assert client_for(reviewer).post(url).status_code == 403
    assert client_for(coordinator).get(url)["Location"] == f"/jobs/{job.pk}/"
    assert client_for(coordinator).post("/tables/bulk/999999/undo/").status_code == 404
    assert not BulkAction.objects.get(job=job).undone_at


def test_the_api_previews_checks_the_selection_and_undoes(client, coordinator, annotator):
    pairs = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(2)]
    auth = {"HTTP_AUTHORIZATION": f"Token {api_token_create(user=coordinator, name='bulk')[1]}"}
    body = {"filter": {"status": "submitted"}, "action": "accept"}
    shown = client.post("/api/pairs/bulk/preview/", body, content_type="application/json", **auth)
    assert shown.status_code == 200 and shown.json()["will_change"] == 2 and len(shown.json()["sample"]) == 2
    expect = {"expect_count": 1, "expect_digest": shown.json()["digest"]}
    stale = client.post("/api/pairs/bulk/", {**body, **expect}, content_type="application/json", **auth)
    assert stale.status_code == 409 and "changed since the preview" in stale.json()["detail"]
    expect["expect_count"] = 2
    started = client.post("/api/pairs/bulk/", {**body, **expect}, content_type="application/json", **auth)
    assert started.status_code == 202
    run_job(Job.objects.get(pk=started.json()["id"]))
    undone = client.post(f"/api/bulk/{started.json()['id']}/undo/", **auth)
    assert undone.status_code == 200 and undone.json() == {"restored": 2, "kept_count": 0, "kept": []}
    again = client.post(f"/api/bulk/{started.json()['id']}/undo/", **auth)
    assert again.status_code == 409
    assert set(Pair.objects.filter(pk__in=[p.pk for p in pairs]).values_list("status", flat=True)) == {"submitted"}
