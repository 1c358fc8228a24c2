"""Captions: batches and the stratified sample, the caption queue, submit, review, the exported caption, quality
signals, pages and API (permissions for every view and endpoint), and the demo data."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotator.captions import services as captions
from annotator.models import Caption, CaptionBatch, CaptionReview, CaptionSkip, CaptionTask, Category, Pair
from demo.captions import seed_demo_captions
from tests.conftest import make_user
from tests.factories import make_pair, make_video

pytestmark = pytest.mark.django_db

GOOD = "In the second image the red square has moved a little to the right."
OTHER = "The blue cup on the table is now lying on its side next to the plate."


@pytest.fixture
def video(db):
    return make_video(frames=2)


def pairs(video, n: int, **fields) -> list[Pair]:
    return [make_pair(video=video, **fields) for _ in range(n)]


def batch_over(coordinator, pair_list, **options) -> CaptionBatch:
    return captions.caption_batch_create(
        created_by=coordinator, title="t", selection="list", pair_ids=[p.pk for p in pair_list], **options
    )


def write(user, text: str = GOOD, key: str | None = None) -> Caption:
    task = captions.caption_task_lease(user=user)
    assert task is not None, "expected a task to lease"
    return captions.caption_submit(task_id=task.pk, user=user, text=text, client_key=key)


# --- Batches and the sample --------------------------------------------------------------------------------


def test_it_samples_a_fraction_of_each_category_at_least_one_reproducibly():
    ids = {"temporal": list(range(1, 21)), "state": list(range(100, 110)), "quality": [500]}
    sample = captions.stratified_sample(ids, 0.1, seed=7)
    assert sample == captions.stratified_sample(ids, 0.1, seed=7)
    assert len([i for i in sample if i < 100]) == 2
    assert len([i for i in sample if 100 <= i < 500]) == 1
    assert 500 in sample
    others = {tuple(captions.stratified_sample(ids, 0.1, seed=s)) for s in range(20)}
    assert len(others) > 1, "different seeds must give different samples"


def test_a_category_gaining_pairs_does_not_change_another_categorys_sample():
    before = captions.stratified_sample({"temporal": list(range(20)), "state": [100, 101, 102]}, 0.5, seed=3)
    after = captions.stratified_sample({"temporal": list(range(20)), "state": [100, 101, 102, 103, 104]}, 0.5, 3)
    assert [i for i in before if i < 100] == [i for i in after if i < 100]


def test_it_creates_a_sample_batch_with_its_seed_recorded_and_same_seed_same_pairs(coordinator, video):
    pairs(video, 10, category=Category.TEMPORAL)
    pairs(video, 4, category=Category.STATE)
    pairs(video, 3, category=Category.STATE, status=Pair.Status.SUBMITTED)
    first = captions.caption_batch_create(created_by=coordinator, title="a", selection="sample", fraction=0.2, seed=11)
    again = captions.caption_batch_create(created_by=coordinator, title="b", selection="sample", fraction=0.2, seed=11)
    chosen = set(first.tasks.values_list("pair_id", flat=True))
    assert chosen == set(again.tasks.values_list("pair_id", flat=True))
    categories = sorted(Pair.objects.filter(pk__in=chosen).values_list("category", flat=True))
    assert categories == ["state", "temporal", "temporal"]
    assert Pair.objects.filter(pk__in=chosen, status=Pair.Status.ACCEPTED).count() == 3
    assert (first.seed, first.fraction) == (11, 0.2)
    unseeded = captions.caption_batch_create(created_by=coordinator, title="c", selection="sample", fraction=0.2)
    assert unseeded.seed is not None


def test_it_makes_one_task_per_pair_and_needed_caption(coordinator, video):
    accepted = pairs(video, 3)
    make_pair(video=video, status=Pair.Status.REJECTED)
    batch = captions.caption_batch_create(created_by=coordinator, title="all", selection="all", captions_per_item=2)
    assert batch.tasks.count() == 6
    assert set(batch.tasks.values_list("pair_id", flat=True)) == {p.pk for p in accepted}
    assert sorted(batch.tasks.values_list("slot", flat=True)) == [1, 1, 1, 2, 2, 2]


def test_it_refuses_a_list_with_pairs_that_are_not_accepted_and_stores_nothing(coordinator, video):
    good = make_pair(video=video)
    draft = make_pair(video=video, status=Pair.Status.DRAFT)
    with pytest.raises(ValidationError) as error:
        batch_over(coordinator, [good, draft])
    assert f"Not accepted pairs (or no such pair): {draft.pk}." in error.value.message_dict["pair_ids"]
    assert not CaptionBatch.objects.exists() and not CaptionTask.objects.exists()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"selection": "sample", "fraction": 0}, "fraction"),
        ({"selection": "sample", "fraction": 1.5}, "fraction"),
        ({"selection": "list", "pair_ids": []}, "pair_ids"),
        ({"selection": "all", "captions_per_item": 0}, "captions_per_item"),
        ({"selection": "everything"}, "selection"),
    ],
)
def test_it_rejects_bad_batch_settings_with_the_field_named(coordinator, video, options, field):
    make_pair(video=video)
    with pytest.raises(ValidationError) as error:
        captions.caption_batch_create(created_by=coordinator, title="x", **options)
    assert field in error.value.message_dict


def test_it_says_when_there_are_no_accepted_pairs(coordinator):
    with pytest.raises(ValidationError, match="no accepted pairs"):
        captions.caption_batch_create(created_by=coordinator, title="x", selection="all")


# --- The queue ---------------------------------------------------------------------------------------------


def test_it_renews_the_held_task_instead_of_leasing_a_second(annotator, coordinator, video):
    batch_over(coordinator, pairs(video, 2))
    first = captions.caption_task_lease(user=annotator)
    again = captions.caption_task_lease(user=annotator)
    assert first.pk == again.pk
    assert CaptionTask.objects.filter(lease_holder=annotator).count() == 1


def test_an_expired_lease_goes_back_to_the_queue(annotator, annotator2, coordinator, video):
    batch_over(coordinator, pairs(video, 1))
    task = captions.caption_task_lease(user=annotator)
    assert captions.caption_task_lease(user=annotator2) is None
    CaptionTask.objects.filter(pk=task.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))
    assert captions.caption_task_lease(user=annotator2).pk == task.pk
    with pytest.raises(captions.CaptionConflict, match="someone else"):
        captions.caption_draft_save(task_id=task.pk, user=annotator, text="late")


def test_it_never_offers_a_pair_to_its_author_unless_the_batch_allows_it(annotator, annotator2, coordinator, video):
    own = make_pair(video=video, author=annotator)
    batch_over(coordinator, [own])
    assert captions.caption_task_lease(user=annotator) is None
    assert captions.caption_task_lease(user=annotator2).pair_id == own.pk
    other = make_pair(video=video, author=annotator)
    batch_over(coordinator, [other], allow_own_pairs=True)
    assert captions.caption_task_lease(user=annotator).pair_id == other.pk


def test_one_annotator_writes_at_most_one_caption_per_pair(annotator, annotator2, coordinator, video):
    pair = make_pair(video=video)
    batch_over(coordinator, [pair], captions_per_item=2)
    write(annotator)
    assert captions.caption_task_lease(user=annotator) is None
    assert write(annotator2, OTHER).pair_id == pair.pk


def test_a_skipped_task_is_not_offered_again_and_needs_a_reason(annotator, annotator2, coordinator, video):
    batch_over(coordinator, pairs(video, 1))
    task = captions.caption_task_lease(user=annotator)
    captions.caption_draft_save(task_id=task.pk, user=annotator, text="half a thought")
    with pytest.raises(ValidationError, match="Say why"):
        captions.caption_task_skip(task_id=task.pk, user=annotator, reason="  ")
    captions.caption_task_skip(task_id=task.pk, user=annotator, reason="no visible difference")
    assert CaptionSkip.objects.get().reason == "no visible difference"
    assert not Caption.objects.exists(), "the skipped draft is dropped"
    assert captions.caption_task_lease(user=annotator) is None
    assert captions.caption_task_lease(user=annotator2).pk == task.pk


def run_at_once(*calls):
    """Run the calls in threads released together; return their results (or exceptions)."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        except BaseException as error:  # returned to the test: a thread's exception would vanish otherwise
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.django_db(transaction=True)
def test_a_double_submit_at_the_same_moment_stores_one_caption(annotator, coordinator):
    batch_over(coordinator, [make_pair()])
    task = captions.caption_task_lease(user=annotator)
    submit = lambda: captions.caption_submit(task_id=task.pk, user=annotator, text=GOOD, client_key="same")  # noqa: E731
    first, second = run_at_once(submit, submit)
    assert isinstance(first, Caption) and isinstance(second, Caption) and first.pk == second.pk
    assert Caption.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_accepting_one_pairs_captions_at_once_choose_exactly_one(annotator, annotator2, coordinator):
    pair = make_pair()
    batch_over(coordinator, [pair], captions_per_item=2)
    first, second = write(annotator), write(annotator2, OTHER)
    reviewers = [make_user("rev1", "reviewer"), make_user("rev2", "reviewer")]
    results = run_at_once(
        lambda: captions.caption_review(caption_id=first.pk, reviewer=reviewers[0], decision="accept"),
        lambda: captions.caption_review(caption_id=second.pk, reviewer=reviewers[1], decision="accept"),
    )
    assert all(isinstance(result, Caption) for result in results)
    assert Caption.objects.filter(pair=pair, status="accepted").count() == 2
    assert Caption.objects.filter(pair=pair, chosen=True).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_annotators_never_lease_the_same_task(coordinator):
    video = make_video(frames=2)
    batch_over(coordinator, [make_pair(video=video) for _ in range(5)])
    users = [make_user(f"worker{i}", "annotator") for i in range(10)]
    results = run_at_once(*[lambda user=user: captions.caption_task_lease(user=user) for user in users])
    assert not [r for r in results if isinstance(r, BaseException)]
    taken = [task.pk for task in results if task is not None]
    assert len(taken) == 5 and len(set(taken)) == 5
    assert results.count(None) == 5
    assert CaptionTask.objects.exclude(lease_holder=None).count() == 5


def test_an_annotator_who_holds_a_task_cannot_take_a_second_one(client_for, annotator, coordinator, video):
    batch_over(coordinator, pairs(video, 2))
    held = captions.caption_task_lease(user=annotator)
    other = CaptionTask.objects.exclude(pk=held.pk).get()
    with pytest.raises(captions.CaptionConflict, match=f"You hold caption task {held.pk}: submit or skip it first"):
        captions.caption_draft_save(task_id=other.pk, user=annotator, text="a second one")
    response = client_for(annotator).put(
        f"/api/captions/tasks/{other.pk}/draft/", {"text": "a second one"}, content_type="application/json"
    )
    assert response.status_code == 409
    assert list(CaptionTask.objects.held_by(annotator)) == [held]
    assert not Caption.objects.filter(task=other).exists()


def test_an_expired_caption_lease_is_held_nowhere_without_a_sweep(
    client_for, annotator, annotator2, coordinator, video
):
    batch_over(coordinator, pairs(video, 2))
    first = captions.caption_task_lease(user=annotator)
    CaptionTask.objects.filter(pk=first.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))
    assert not CaptionTask.objects.held().exists()
    page = client_for(annotator).get("/captions/work/")
    assert page.status_code == 200, "an expired lease must not send the annotator back to its task"
    assert page.context["available"] == 2
    # Taking another task ends the expired lease in the same transaction (the holder column is unique).
    second = CaptionTask.objects.exclude(pk=first.pk).get()
    captions.caption_draft_save(task_id=second.pk, user=annotator, text="started")
    assert CaptionTask.objects.get(pk=first.pk).lease_holder is None
    assert captions.caption_task_lease(user=annotator2).pk == first.pk


def test_the_database_refuses_a_second_caption_lease_for_one_annotator(annotator, coordinator, video):
    batch_over(coordinator, pairs(video, 2))
    first, second = CaptionTask.objects.order_by("pk")
    CaptionTask.objects.filter(pk=first.pk).update(lease_holder=annotator, lease_expires=timezone.now())
    with pytest.raises(IntegrityError), transaction.atomic():
        CaptionTask.objects.filter(pk=second.pk).update(lease_holder=annotator, lease_expires=timezone.now())


@pytest.mark.django_db(transaction=True)
def test_one_annotator_firing_concurrent_requests_for_different_tasks_ends_holding_one(coordinator):
    video = make_video(frames=2)
    batch_over(coordinator, [make_pair(video=video) for _ in range(10)])
    user = make_user("racer", "annotator")
    tasks = list(CaptionTask.objects.order_by("pk"))
    # Six autosaves, each for another task, and two asks for the next task, all at once.
    calls = [lambda t=t: captions.caption_draft_save(task_id=t.pk, user=user, text="draft") for t in tasks[:6]]
    calls += [lambda: captions.caption_task_lease(user=user) for _ in range(2)]
    results = run_at_once(*calls)
    unexpected = [r for r in results if isinstance(r, BaseException) and not isinstance(r, captions.CaptionConflict)]
    assert not unexpected, unexpected
    held = list(CaptionTask.objects.held_by(user))
    assert len(held) == 1
    assert CaptionTask.objects.filter(lease_holder=user).count() == 1
    won = {r.task_id if isinstance(r, Caption) else r.pk for r in results if not isinstance(r, BaseException)}
    assert won == {held[0].pk}
    assert Caption.objects.filter(author=user).exclude(task=held[0]).count() == 0
    refused = [str(r) for r in results if isinstance(r, captions.CaptionConflict)]
    assert refused and all("You hold caption task" in text or "a moment ago" in text for text in refused)


# --- Drafts and submit -------------------------------------------------------------------------------------


def test_autosave_keeps_one_draft_and_renews_the_lease(annotator, coordinator, video):
    batch_over(coordinator, pairs(video, 1))
    task = captions.caption_task_lease(user=annotator)
    CaptionTask.objects.filter(pk=task.pk).update(lease_expires=timezone.now() + timedelta(seconds=5))
    captions.caption_draft_save(task_id=task.pk, user=annotator, text="The cup")
    captions.caption_draft_save(task_id=task.pk, user=annotator, text="The cup moved")
    assert list(Caption.objects.values_list("text", "status")) == [("The cup moved", "draft")]
    task.refresh_from_db()
    assert task.lease_expires > timezone.now() + timedelta(minutes=1)


def test_the_same_client_key_submits_once(annotator, coordinator, video):
    batch_over(coordinator, pairs(video, 2))
    task = captions.caption_task_lease(user=annotator)
    first = captions.caption_submit(task_id=task.pk, user=annotator, text=GOOD, client_key="k1")
    again = captions.caption_submit(task_id=task.pk, user=annotator, text=GOOD + " changed", client_key="k1")
    assert first.pk == again.pk and again.text == GOOD
    assert Caption.objects.count() == 1
    task.refresh_from_db()
    assert (task.status, task.caption_id, task.lease_holder_id) == ("done", first.pk, None)
    assert first.status == "submitted" and first.submitted_at is not None


def test_a_submit_on_a_free_task_takes_it_and_ends_its_lease_with_the_task(annotator, coordinator, video):
    batch_over(coordinator, pairs(video, 2))
    first, second = CaptionTask.objects.order_by("pk")
    captions.caption_submit(task_id=first.pk, user=annotator, text=GOOD, client_key="free-1")  # never leased
    first.refresh_from_db()
    assert (first.status, first.lease_holder_id) == ("done", None)
    assert captions.caption_task_lease(user=annotator) == second  # holding nothing, the next one comes


def test_another_users_client_key_is_refused(annotator, annotator2, coordinator, video):
    batch_over(coordinator, pairs(video, 2))
    write(annotator, key="shared")
    task = captions.caption_task_lease(user=annotator2)
    with pytest.raises(ValidationError, match="another caption"):
        captions.caption_submit(task_id=task.pk, user=annotator2, text=OTHER, client_key="shared")


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "empty"), ("   \n ", "empty"), ("Cup moved.", "at least 20"), ("x" * 601, "600 at most")],
)
def test_it_refuses_captions_out_of_bounds_and_keeps_the_draft(annotator, coordinator, video, text, message):
    batch_over(coordinator, pairs(video, 1))
    task = captions.caption_task_lease(user=annotator)
    captions.caption_draft_save(task_id=task.pk, user=annotator, text="my draft")
    with pytest.raises(ValidationError, match=message):
        captions.caption_submit(task_id=task.pk, user=annotator, text=text, client_key="k")
    assert list(Caption.objects.values_list("text", "status", "client_key")) == [("my draft", "draft", None)]
    task.refresh_from_db()
    assert task.status == "open"


def test_only_the_lease_holder_may_submit(annotator, annotator2, coordinator, video):
    batch_over(coordinator, pairs(video, 1))
    task = captions.caption_task_lease(user=annotator)
    with pytest.raises(captions.CaptionConflict):
        captions.caption_submit(task_id=task.pk, user=annotator2, text=GOOD)
    captions.caption_submit(task_id=task.pk, user=annotator, text=GOOD)
    with pytest.raises(captions.CaptionConflict, match="already done"):
        captions.caption_submit(task_id=task.pk, user=annotator, text=GOOD)


# --- Review and the exported caption -----------------------------------------------------------------------


def test_the_first_accepted_caption_is_chosen_and_the_reviewer_can_switch(
    annotator, annotator2, reviewer, coordinator, video
):
    pair = make_pair(video=video)
    batch_over(coordinator, [pair], captions_per_item=2)
    first, second = write(annotator), write(annotator2, OTHER)
    captions.caption_review(caption_id=first.pk, reviewer=reviewer, decision="accept")
    captions.caption_review(caption_id=second.pk, reviewer=reviewer, decision="accept")
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.chosen, second.status, second.chosen) == ("accepted", True, "accepted", False)
    assert pair.chosen_caption == first
    captions.caption_choose(caption_id=second.pk, reviewer=reviewer)
    assert pair.chosen_caption == second
    assert Caption.objects.filter(pair=pair, status="accepted").count() == 2, "the other stays stored"


def test_export_fields_of_a_captioned_and_an_uncaptioned_pair(annotator, reviewer, coordinator, video):
    captioned, plain = make_pair(video=video), make_pair(video=video)
    batch_over(coordinator, [captioned])
    caption = write(annotator)
    assert Pair.objects.with_caption().get(pk=captioned.pk).caption_text is None, "submitted is not exported"
    captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="accept")
    rows = {p.pk: p.caption_text for p in Pair.objects.with_caption()}
    assert rows == {captioned.pk: GOOD, plain.pk: None}
    assert captioned.chosen_caption.text == GOOD and plain.chosen_caption is None


def test_nobody_reviews_their_own_caption(annotator, coordinator, video):
    batch_over(coordinator, pairs(video, 1))
    own = write(coordinator)
    assert captions.caption_next_for_review(coordinator) is None
    with pytest.raises(PermissionDenied):
        captions.caption_review(caption_id=own.pk, reviewer=coordinator, decision="accept")
    assert captions.caption_next_for_review(annotator) == own


def test_a_rejection_needs_a_reason_and_reopens_the_slot(annotator, annotator2, reviewer, coordinator, video):
    batch_over(coordinator, pairs(video, 1))
    caption = write(annotator)
    with pytest.raises(ValidationError, match="Say why"):
        captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="reject")
    captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="reject", reason="names no object")
    caption.refresh_from_db()
    assert (caption.status, caption.chosen) == ("rejected", False)
    assert CaptionReview.objects.get().reason == "names no object"
    assert captions.caption_task_lease(user=annotator) is None, "its author does not get it again"
    assert captions.caption_task_lease(user=annotator2) is not None
    with pytest.raises(captions.CaptionConflict, match="already reviewed"):
        captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="accept")


def test_an_edit_is_accepted_with_the_original_kept(annotator, reviewer, coordinator, video):
    batch_over(coordinator, pairs(video, 1))
    caption = write(annotator)
    with pytest.raises(ValidationError, match="empty"):
        captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="edit", text="")
    captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="edit", text=f"  {OTHER} ")
    caption.refresh_from_db()
    assert (caption.text, caption.status, caption.chosen) == (OTHER, "accepted", True)
    assert CaptionReview.objects.get().original_text == GOOD


def test_only_accepted_captions_can_be_chosen(annotator, reviewer, coordinator, video):
    batch_over(coordinator, pairs(video, 1))
    caption = write(annotator)
    with pytest.raises(ValidationError, match="accepted"):
        captions.caption_choose(caption_id=caption.pk, reviewer=reviewer)


# --- Quality signals ---------------------------------------------------------------------------------------


def test_it_flags_short_duplicate_and_near_duplicate_captions(annotator, annotator2, coordinator, video):
    batch_over(coordinator, pairs(video, 6))
    base = "the red car in the background has moved two metres to the left of the tall green tree near the house"
    original = write(annotator, base.capitalize() + ".")
    assert original.flags == []
    short = write(annotator, "The red car drove away.")
    assert short.flags == ["short"]
    own_echo = write(annotator, base.replace("two", "about two"))
    assert own_echo.flags == [], "near duplicates count only against another annotator"
    copy = write(annotator2, base.upper())
    assert copy.flags == ["duplicate"] and copy.flag_detail["duplicate"]["caption"] == original.pk
    near = write(annotator2, base.replace("tall", "tall old"))
    assert near.flags == ["near_duplicate"] and near.flag_detail["near_duplicate"]["caption"] == original.pk
    different = write(annotator2, OTHER)
    assert different.flags == []


def test_the_prefix_filter_finds_every_pair_the_full_comparison_finds():
    texts = [
        "the red car moved left of the tree",
        "the red car moved left of the big tree",
        "a red car moved to the left of a tree",
        "the blue cup fell over on the table",
        "the blue cup fell over on the wooden table",
        "two people walk towards the camera",
    ]
    features = [captions.caption_text_features(t, threshold=0.8) for t in texts]
    for i, (_, tokens_i, prefix_i) in enumerate(features):
        for j, (_, tokens_j, prefix_j) in enumerate(features):
            if i != j and captions.jaccard(tokens_i, tokens_j) >= 0.8:
                assert set(prefix_i) & set(prefix_j), (texts[i], texts[j])


def test_it_counts_captions_and_flag_rates_per_annotator(annotator, annotator2, reviewer, coordinator, video):
    batch_over(coordinator, pairs(video, 4))
    accepted = write(annotator)
    write(annotator, "Cup fell over, gone.")
    write(annotator2, OTHER)
    captions.caption_review(caption_id=accepted.pk, reviewer=reviewer, decision="accept")
    stats = {row["username"]: row for row in captions.caption_annotator_stats()}
    assert stats["alice"]["written"] == 2 and stats["alice"]["accepted"] == 1 and stats["alice"]["awaiting"] == 1
    assert stats["alice"]["short"] == 1 and stats["alice"]["flag_rate"] == 0.5
    assert stats["bob"]["flagged"] == 0 and stats["bob"]["flag_rate"] == 0


# --- Demo --------------------------------------------------------------------------------------------------


def test_the_demo_leaves_captions_in_every_state_and_is_safe_to_rerun(video):
    for name in ("annotator1", "annotator2"):
        make_user(name, "annotator")
    make_user("reviewer", "reviewer", "annotator")
    make_user("coordinator", "coordinator")
    pairs(video, 3)
    assert seed_demo_captions() is not None
    statuses = set(Caption.objects.values_list("status", flat=True))
    assert statuses == {"draft", "submitted", "accepted", "rejected"}
    assert Caption.objects.exported().count() == 1
    assert Caption.objects.filter(status="accepted", chosen=False).exists()
    count = Caption.objects.count()
    assert seed_demo_captions() is None and Caption.objects.count() == count


def test_the_demo_does_nothing_without_accepted_pairs():
    make_user("annotator1", "annotator")
    assert seed_demo_captions() is None


def test_it_normalises_any_script_and_survives_very_long_words():
    normalized, tokens, _ = captions.caption_text_features("Das Café ist jetzt GESCHLOSSEN, die Tür_zu!")
    assert normalized == "das café ist jetzt geschlossen die tür zu"
    assert "café" in tokens
    assert max(len(t) for t in captions.caption_text_features("x" * 300)[1]) == 100
