"""The data manager (issue 15): each filter and sort of the pairs, videos and captions tables, bad filter values,
queries per page, and every bulk action with its per-item refusals, through the pages and the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotator.datamanager.bulk import bulk_run_unit, bulk_start
from annotator.datamanager.tables import CAPTIONS, PAIRS, VIDEOS
from annotator.jobs.services import UnitRef
from annotator.models import Caption, CaptionBatch, CaptionTask, Category, Domain, Job, JobItem, Pair, Review, Video
from annotator.picking import services as picking
from evaluation.models import StudyItem
from evaluation.studies import services as studies
from subtlebench.errors import Forbidden, Invalid
from subtlebench.tokens import api_token_create
from tests.conftest import make_user
from tests.factories import make_pair, make_video
from tests.model_fixtures import make_endpoint, make_run, record


def ids(table, data) -> list[int]:
    return sorted(table.queryset(table.parse(data), ordered=False).values_list("pk", flat=True))


def run_job(job: Job) -> Job:
    """Run every unit of the job in this process, as the worker would (claim, act, complete)."""
    for unit in job.tasks.order_by("pk"):
        bulk_run_unit(job_id=job.pk, ids=unit.kwargs["ids"], unit=UnitRef(unit.pk, celery_id=f"c{unit.pk}"))
    job.refresh_from_db()
    return job


@pytest.fixture
def pairs(db, annotator, annotator2, reviewer, coordinator):
    """Pairs that differ in one column each, named by what sets them apart."""
    old = timezone.now() - timedelta(days=40)
    p = {
        "submitted": make_pair(status=Pair.Status.SUBMITTED, author=annotator, question="Which mug is redder?"),
        "accepted": make_pair(
            author=annotator2,
            category=Category.STATE,
            similarity=0.85,
            regions=[{"image": 1, "x": 0, "y": 0, "w": 4, "h": 4}, {"image": 2, "x": 80, "y": 60, "w": 80, "h": 60}],
        ),
        "rejected": make_pair(status=Pair.Status.REJECTED, author=annotator, domain=Domain.GAMING, similarity=0.99),
        "old": make_pair(author=annotator2, created=old, similarity=0.91),
    }
    make_pair(status=Pair.Status.DRAFT, author=annotator)  # drafts are never in the table
    Review.objects.create(pair=p["accepted"], reviewer=reviewer, decision="accept")
    Review.objects.create(pair=p["rejected"], reviewer=coordinator, decision="reject", reason="blurry")
    Caption.objects.create(
        pair=p["accepted"], author=annotator, text="The apple is peeled a little more.", status="accepted", chosen=True
    )
    Pair.objects.filter(pk=p["old"].pk).update(export_split="val", excluded_from_studies=True)
    Pair.objects.filter(pk=p["accepted"].pk).update(export_split="test")
    return p


def pk(*rows) -> list[int]:
    return sorted(row.pk for row in rows)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, ["submitted", "accepted", "rejected", "old"]),
        ({"status": "submitted"}, ["submitted"]),
        ({"category": "state"}, ["accepted"]),
        ({"domain": "gaming"}, ["rejected"]),
        ({"annotator": "alice"}, ["submitted", "rejected"]),
        ({"reviewer": "rita"}, ["accepted"]),
        ({"similarity_min": "0.9"}, ["submitted", "rejected", "old"]),
        ({"similarity_min": "0.86", "similarity_max": "0.95"}, ["submitted", "old"]),
        ({"created_to": (timezone.now() - timedelta(days=30)).date().isoformat()}, ["old"]),
        ({"created_from": timezone.now().date().isoformat()}, ["submitted", "accepted", "rejected"]),
        ({"caption": "yes"}, ["accepted"]),
        ({"caption": "no"}, ["submitted", "rejected", "old"]),
        ({"split": "val"}, ["old"]),
        ({"split": "test"}, ["accepted"]),
        ({"split": "none"}, ["submitted", "rejected"]),
        ({"excluded": "yes"}, ["old"]),
        ({"regions": "yes"}, ["accepted"]),
        ({"regions": "no"}, ["submitted", "rejected", "old"]),
        ({"q": "redder mugs"}, ["submitted"]),  # English stemming: mugs finds mug
        ({"q": "peeled"}, ["accepted"]),  # a caption's words find its pair
        ({"q": "peeled", "status": "submitted"}, []),
    ],
)
def test_it_filters_pairs_on_each_column(pairs, data, expected):
    assert ids(PAIRS, data) == pk(*(pairs[name] for name in expected))


def test_it_filters_pairs_in_a_study(pairs, coordinator):
    assert ids(PAIRS, {"study": "yes"}) == []
    study = studies.study_create(name="S", fraction=1.0, practice_count=0)
    in_study = set(StudyItem.objects.filter(study=study).values_list("pair_id", flat=True))
    assert in_study and pairs["old"].pk not in in_study  # excluded from study pools: never drawn
    assert ids(PAIRS, {"study": "yes"}) == sorted(in_study)
    assert set(ids(PAIRS, {"study": "no"})) == {p.pk for p in pairs.values()} - in_study


def test_it_filters_pairs_on_the_share_of_models_that_got_them_right(pairs):
    """ "Models correct k of n" (the latest answer of each endpoint; a failed request is no answer)."""
    first, second = make_endpoint(), make_endpoint()
    run_1, run_2 = make_run(first), make_run(second)
    record(run_1, pairs["submitted"], True), record(run_2, pairs["submitted"], True)  # 2 of 2
    record(run_1, pairs["accepted"], True), record(run_2, pairs["accepted"], False)  # 1 of 2
    record(run_1, pairs["rejected"], False), record(run_2, pairs["rejected"], None)  # 0 of 1: one failed
    # pairs["old"]: no model answered it, so no share: any bound leaves it out
    assert ids(PAIRS, {"models_max": "0"}) == pk(pairs["rejected"])
    assert ids(PAIRS, {"models_min": "1"}) == pk(pairs["submitted"])
    assert ids(PAIRS, {"models_min": "0.5"}) == pk(pairs["submitted"], pairs["accepted"])
    assert ids(PAIRS, {"models_max": "0.5"}) == pk(pairs["accepted"], pairs["rejected"])
    assert ids(PAIRS, {"models_max": "0.5", "category": "state"}) == pk(pairs["accepted"])
    scores = {p.pk: (p.model_correct, p.model_answered) for p in PAIRS.queryset(PAIRS.parse({"sort": "-models"}))}
    assert scores[pairs["accepted"].pk] == (1, 2) and scores[pairs["old"].pk] == (0, 0)
    with pytest.raises(Invalid) as raised:
        PAIRS.parse({"models_max": "2"})
    assert "outside 0 to 1" in " ".join(raised.value.errors["models"])


@pytest.mark.parametrize("column", [c.name for c in PAIRS.columns])
def test_it_sorts_pairs_on_each_column(pairs, column):
    order = PAIRS.queryset(PAIRS.parse({"sort": column}))
    attribute = next(c.order for c in PAIRS.columns if c.name == column)
    values = [getattr(p, attribute) for p in order]
    present = [v for v in values if v is not None]
    assert present == sorted(present) and values[: len(present)] == present  # nulls last
    backwards = [getattr(p, attribute) for p in PAIRS.queryset(PAIRS.parse({"sort": f"-{column}"}))]
    assert [v for v in backwards if v is not None] == sorted(present, reverse=True)


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"status": "lost"}, "status", "'lost' is not one of"),
        ({"similarity_min": "high"}, "similarity", "not a number"),
        ({"similarity_min": "0.9", "similarity_max": "0.5"}, "similarity", "above the maximum"),
        ({"similarity_max": "7"}, "similarity", "outside"),
        ({"created_from": "31/12/2026"}, "created", "not a date"),
        ({"annotator": "nobody"}, "annotator", "no user 'nobody'"),
        ({"caption": "maybe"}, "caption", "not yes or no"),
        ({"sort": "colour"}, "sort", "not a column"),
        ({"page": "zero"}, "page", "not a page number"),
        ({"q": "x" * 201}, "q", "at most 200"),
        ({"q": "cup\x00"}, "q", "NUL"),
        ({"annotator": "al\x00ice"}, "annotator", "NUL"),
    ],
)
def test_a_bad_filter_value_says_which_and_why(pairs, data, field, words):
    with pytest.raises(Invalid) as raised:
        PAIRS.parse(data)
    assert words in " ".join(raised.value.errors[field])


def test_an_api_filter_with_an_unknown_key_is_refused(pairs):
    with pytest.raises(Invalid) as raised:
        PAIRS.parse({"colour": "red"})
    assert "Unknown filter colour" in raised.value.errors["filter"][0]


def test_the_page_shows_a_bad_filter_as_a_400_with_the_reason(client_for, coordinator, pairs):
    response = client_for(coordinator).get("/tables/pairs/?similarity_min=high&status=lost")
    assert response.status_code == 400
    body = response.content.decode()
    assert "Similarity: the minimum &#x27;high&#x27; is not a number." in body
    assert "Status: &#x27;lost&#x27; is not one of" in body


def test_the_pairs_page_filters_sorts_and_answers_htmx_with_the_table_only(client_for, reviewer, pairs):
    client = client_for(reviewer)
    page = client.get("/tables/pairs/?annotator=alice&sort=-similarity")
    body = page.content.decode()
    assert page.status_code == 200
    assert body.index(f"/review/pairs/{pairs['rejected'].pk}/") < body.index(f"/review/pairs/{pairs['submitted'].pk}/")
    assert f"/review/pairs/{pairs['accepted'].pk}/" not in body
    assert 'name="ids"' not in body  # reviewers read; only coordinators act
    partial = client.get("/tables/pairs/?status=submitted", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="dm-table")
    text = partial.content.decode()
    assert text.lstrip().startswith('<form id="dm-table"') and "<html" not in text
    assert f"/review/pairs/{pairs['submitted'].pk}/" in text and f"/review/pairs/{pairs['old'].pk}/" not in text


def test_the_tables_are_for_reviewers_and_coordinators(client, client_for, annotator):
    assert client.get("/tables/pairs/").status_code == 302  # anonymous: to the login page
    assert client_for(annotator).get("/tables/videos/").status_code == 403
    assert client_for(annotator).post("/tables/pairs/bulk/").status_code == 403


def test_the_bulk_form_refuses_a_get_and_a_reviewer(client_for, coordinator, reviewer):
    assert client_for(coordinator).get("/tables/pairs/bulk/")["Location"] == "/tables/pairs/"  # starts nothing
    assert client_for(reviewer).post("/tables/pairs/bulk/", {"action": "accept", "ids": ["1"]}).status_code == 403


@pytest.mark.parametrize("table", ["pairs", "videos", "captions"])
def test_a_table_page_takes_at_most_10_queries_with_many_rows(
    client_for, coordinator, annotator, table, django_assert_max_num_queries
):
    for n in range(60):
        pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)  # each with its own video
        Review.objects.create(pair=pair, reviewer=coordinator, decision="accept")
        Caption.objects.create(pair=pair, author=annotator, text=f"The cup moved {n} cm.", status="submitted")
    client = client_for(coordinator)
    client.get(f"/tables/{table}/")  # the session's first queries (login) are not the page's
    with django_assert_max_num_queries(10):
        response = client.get(f"/tables/{table}/?q={'cup' if table != 'videos' else ''}&sort=-created")
    assert response.status_code == 200
    assert response.content.decode().count("<tr>") > 40


def test_the_videos_table_counts_pairs_leases_embeddings_and_skips(coordinator, annotator, annotator2):
    busy = make_video(frames=3, yt8m_id="busy01")
    idle = make_video(frames=2, yt8m_id="idle01")
    Video.objects.filter(pk=idle.pk).update(title="A quiet street")
    for status in ("submitted", "submitted", "accepted", "rejected"):
        make_pair(status=status, author=annotator, video=busy)
    picking.video_heartbeat(video=busy, user=annotator)
    picking.video_assign(video=idle, user=annotator2, by=coordinator)
    picking.video_release(video=idle, user=coordinator, reason="bad_video")
    rows = {v.yt8m_id: v for v in VIDEOS.queryset(VIDEOS.parse({}))}
    assert (rows["busy01"].pairs_submitted, rows["busy01"].pairs_accepted, rows["busy01"].pairs_rejected) == (2, 1, 1)
    assert rows["busy01"].holder_name == "alice" and rows["idle01"].assignee_name == "bob"
    assert rows["idle01"].skip_count == 1 and rows["busy01"].skip_count == 0
    assert ids(VIDEOS, {"holder": "alice"}) == [busy.pk]
    assert ids(VIDEOS, {"leased": "no"}) == [idle.pk]
    assert ids(VIDEOS, {"assignee": "bob"}) == [idle.pk]
    assert ids(VIDEOS, {"skipped": "yes"}) == [idle.pk]
    assert ids(VIDEOS, {"q": "quiet"}) == [idle.pk] and ids(VIDEOS, {"q": "BUSY"}) == [busy.pk]
    assert ids(VIDEOS, {"status": "sampled", "domain": "natural"}) == sorted([busy.pk, idle.pk])
    for column in VIDEOS.columns:  # every column sorts
        assert len(VIDEOS.queryset(VIDEOS.parse({"sort": f"-{column.name}"}))) == 2


def test_the_captions_table_filters_and_searches(annotator, annotator2):
    pair = make_pair(category=Category.STATE)
    short = Caption.objects.create(pair=pair, author=annotator, text="Peeled.", status="rejected", flags=["short"])
    chosen = Caption.objects.create(
        pair=pair, author=annotator2, text="The apple is peeled further.", status="accepted", chosen=True
    )
    assert ids(CAPTIONS, {"author": "bob"}) == [chosen.pk]
    assert ids(CAPTIONS, {"flag": "short"}) == [short.pk]
    assert ids(CAPTIONS, {"chosen": "yes", "status": "accepted", "category": "state"}) == [chosen.pk]
    assert ids(CAPTIONS, {"q": "apple"}) == [chosen.pk]
    for column in CAPTIONS.columns:
        assert len(CAPTIONS.queryset(CAPTIONS.parse({"sort": column.name}))) == 2


# --- Bulk actions -------------------------------------------------------------------------------------------------


def test_bulk_accept_accepts_what_passes_and_says_why_the_rest_stays(coordinator, annotator):
    good = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(3)]
    low = make_pair(status=Pair.Status.SUBMITTED, author=annotator, similarity=0.5)
    own = make_pair(status=Pair.Status.SUBMITTED, author=coordinator)
    done = make_pair(author=annotator)
    job = bulk_start(table="pairs", action="accept", by=coordinator, ids=[p.pk for p in (*good, low, own, done)])
    assert job.kind == Job.Kind.BULK and job.total == 6 and job.result["by"] == "cora"
    job = run_job(job)
    assert job.status == Job.Status.SUCCEEDED and job.done == 6
    assert job.result["ok"] == 3 and job.result["refused"] == 3
    assert set(Pair.objects.filter(status="accepted").values_list("pk", flat=True)) == {p.pk for p in (*good, done)}
    low.refresh_from_db()
    assert low.status == Pair.Status.SUBMITTED
    errors = " | ".join(job.errors)
    assert f"Pair {low.pk}: Similarity 0.500 is below the threshold" in errors
    assert "cannot review your own pair" in errors and f"Pair {done.pk} is accepted already" in errors
    assert Review.objects.filter(reviewer=coordinator, decision="accept").count() == 3


def test_a_bulk_unit_run_again_after_a_crash_does_no_item_twice(coordinator, annotator):
    pairs = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(5)]
    job = bulk_start(table="pairs", action="accept", by=coordinator, ids=[p.pk for p in pairs])
    unit = job.tasks.get()
    # A first worker did two items, then died (its unit stays running, its heartbeat old): the sweeper requeues it.
    bulk_run_unit(job_id=job.pk, ids=unit.kwargs["ids"][:2], unit=None)
    job.tasks.update(status="pending")
    job = run_job(job)
    assert job.status == Job.Status.SUCCEEDED and job.done == 5
    assert JobItem.objects.filter(job=job).count() == 5
    assert Review.objects.count() == 5  # one review per pair, none twice
    assert run_job(job).done == 5  # a redelivery of a done unit does nothing


def test_a_cancelled_bulk_job_retried_does_the_rest(coordinator, annotator):
    from annotator.jobs.services import job_cancel, job_retry

    pairs = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(3)]
    job = bulk_start(table="pairs", action="accept", by=coordinator, ids=[p.pk for p in pairs])
    bulk_run_unit(job_id=job.pk, ids=[pairs[0].pk], unit=None)
    job_cancel(job=job, user=coordinator)
    again = run_job(job_retry(job=job, user=coordinator))
    assert again.status == Job.Status.SUCCEEDED and again.result["action"] == "accept"
    assert (again.result["ok"], again.result["refused"]) == (2, 1)
    assert Pair.objects.filter(status="accepted").count() == 3


def test_when_every_pair_is_refused_the_job_fails_with_the_reasons(coordinator, annotator):
    low = make_pair(status=Pair.Status.SUBMITTED, author=annotator, similarity=0.2)
    job = run_job(bulk_start(table="pairs", action="accept", by=coordinator, filter={"similarity_max": "0.3"}))
    assert job.status == Job.Status.FAILED
    assert "No item went through" in job.errors[-1] and f"Pair {low.pk}: Similarity 0.200" in job.errors[0]


def test_bulk_reject_needs_a_reason_and_sends_the_pairs_back(coordinator, annotator):
    pairs = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(2)]
    with pytest.raises(Invalid) as raised:
        bulk_start(table="pairs", action="reject", by=coordinator, ids=[p.pk for p in pairs])
    assert "reason" in raised.value.errors
    job = run_job(bulk_start(table="pairs", action="reject", by=coordinator, ids=[p.pk for p in pairs], reason="dup"))
    assert job.result["ok"] == 2 and job.result["reason"] == "dup"
    assert list(Review.objects.order_by().values_list("decision", "reason").distinct()) == [("reject", "dup")]
    assert Pair.objects.filter(status="rejected").count() == 2


def test_bulk_reopen_returns_decided_pairs_to_review(coordinator, annotator):
    accepted, rejected = make_pair(author=annotator), make_pair(author=annotator, status=Pair.Status.REJECTED)
    waiting = make_pair(author=annotator, status=Pair.Status.SUBMITTED)
    job = run_job(
        bulk_start(
            table="pairs",
            action="reopen",
            by=coordinator,
            ids=[accepted.pk, rejected.pk, waiting.pk],
            reason="Look again.",
        )
    )
    assert job.result["ok"] == 2 and f"Pair {waiting.pk} is submitted: only an accepted" in job.errors[0]
    assert set(Pair.objects.awaiting_review().values_list("pk", flat=True)) == {accepted.pk, rejected.pk, waiting.pk}
    # Each reopening is in the pair's history, with who and why, as a one-by-one reopen is.
    assert list(accepted.reviews.filter(decision="reopen").values_list("reviewer", "reason")) == [
        (coordinator.pk, "Look again.")
    ]


def test_bulk_adds_accepted_pairs_to_a_caption_batch_once(coordinator, annotator):
    accepted = [make_pair(author=annotator) for _ in range(2)]
    waiting = make_pair(author=annotator, status=Pair.Status.SUBMITTED)
    batch = CaptionBatch.objects.create(title="B", selection="list", created_by=coordinator, captions_per_item=2)
    CaptionTask.objects.create(batch=batch, pair=accepted[0], slot=1)
    with pytest.raises(Invalid, match="no caption batch 999"):
        bulk_start(table="pairs", action="caption_batch", by=coordinator, ids=[accepted[1].pk], target="999")
    with pytest.raises(Invalid, match="no caption batch"):
        bulk_start(table="pairs", action="caption_batch", by=coordinator, ids=[accepted[1].pk], target=str(2**70))
    chosen = [p.pk for p in (*accepted, waiting)]
    job = run_job(bulk_start(table="pairs", action="caption_batch", by=coordinator, ids=chosen, target=str(batch.pk)))
    assert job.result["ok"] == 1 and job.result["refused"] == 2
    assert sorted(CaptionTask.objects.filter(pair=accepted[1]).values_list("slot", flat=True)) == [1, 2]
    assert CaptionTask.objects.filter(pair=accepted[0]).count() == 1
    assert "only accepted pairs get captions" in " ".join(job.errors)


def test_bulk_exclude_keeps_pairs_out_of_new_study_pools(coordinator, annotator):
    pairs = [make_pair(author=annotator) for _ in range(4)]
    run_job(bulk_start(table="pairs", action="exclude", by=coordinator, ids=[p.pk for p in pairs[:3]]))
    assert list(studies.study_pool().values_list("pk", flat=True)) == [pairs[3].pk]
    run_job(bulk_start(table="pairs", action="include", by=coordinator, ids=[pairs[0].pk]))
    assert set(studies.study_pool().values_list("pk", flat=True)) == {pairs[0].pk, pairs[3].pk}


@pytest.mark.torch
def test_bulk_rescore_scores_from_stored_embeddings_and_queues_the_rest(coordinator, annotator):
    from annotator.similarity.services import embedding_job_create, embeddings_compute

    embeddings_compute(job=embedding_job_create(title="embed"))  # nothing yet: no image
    scored = make_pair(author=annotator, similarity=None)
    embeddings_compute(job=embedding_job_create(title="embed"))
    Pair.objects.filter(pk=scored.pk).update(similarity=0.1)
    unembedded = make_pair(author=annotator, similarity=None)
    job = run_job(bulk_start(table="pairs", action="rescore", by=coordinator, ids=[scored.pk, unembedded.pk]))
    scored.refresh_from_db()
    assert scored.similarity > 0.1
    assert job.result["ok"] == 1 and "queued for embedding" in job.errors[0]
    assert Job.objects.filter(kind=Job.Kind.SIMILARITY, title__startswith="Similarity: embed 2 images").exists()


def test_bulk_assign_and_release_videos(coordinator, annotator, annotator2, reviewer):
    videos = [make_video(frames=2) for _ in range(3)]
    picking.video_heartbeat(video=videos[0], user=annotator2)
    with pytest.raises(Invalid, match="not an annotator"):
        bulk_start(table="videos", action="assign", by=coordinator, ids=[videos[0].pk], target=reviewer.username)
    job = run_job(bulk_start(table="videos", action="assign", by=coordinator, filter={}, target="alice"))
    assert job.result["ok"] == 3 and "→ alice" in job.title
    assert set(Video.objects.values_list("assigned_to__username", flat=True)) == {"alice"}
    assert Video.objects.get(pk=videos[0].pk).lease_holder is None  # bob's lease ended
    picking.video_heartbeat(video=videos[1], user=annotator)
    job = run_job(bulk_start(table="videos", action="release", by=coordinator, ids=[v.pk for v in videos]))
    assert job.result["ok"] == 1 and job.result["refused"] == 2
    assert "has no lease to release" in job.errors[0]
    assert not Video.objects.filter(lease_holder__isnull=False).exists()


def test_bulk_start_refuses_bad_requests_with_the_field(coordinator, reviewer, pairs):
    with pytest.raises(Forbidden):
        bulk_start(table="pairs", action="accept", by=reviewer, ids=[pairs["submitted"].pk])
    for kwargs, field in (
        ({"action": "burn", "ids": [1]}, "action"),
        ({"action": "accept"}, "ids"),
        ({"action": "accept", "ids": [1], "filter": {}}, "ids"),
        ({"action": "accept", "ids": []}, "ids"),
        ({"action": "accept", "ids": [2**64]}, "ids"),
        ({"action": "reject", "ids": [1], "reason": "no\x00"}, "reason"),
        ({"action": "accept", "filter": {"status": "lost"}}, "status"),
        ({"action": "accept", "filter": {"q": "zebra"}}, "filter"),
    ):
        with pytest.raises(Invalid) as raised:
            bulk_start(table="pairs", by=coordinator, **kwargs)
        assert field in raised.value.errors, (kwargs, raised.value.errors)
    assert not Job.objects.exists()


def test_the_bulk_form_runs_on_every_matching_row_and_shows_the_job(client_for, coordinator, annotator):
    chosen = [make_pair(status=Pair.Status.SUBMITTED, author=annotator, category=Category.STATE) for _ in range(3)]
    make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    client = client_for(coordinator)
    body = {
        "scope": "matching",
        "filter": "category=state&status=submitted&page=2",
        "action": "accept",
        "confirm": "yes",
    }
    response = client.post("/tables/pairs/bulk/", body)
    job = Job.objects.get(kind=Job.Kind.BULK)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.result["filter"] == {"category": "state", "status": "submitted"} and job.total == 3
    assert sorted(job.tasks.get().kwargs["ids"]) == pk(*chosen)
    ticked = client.post(
        "/tables/pairs/bulk/",
        {"scope": "selected", "ids": [chosen[0].pk], "action": "exclude", "confirm": "yes"},
        HTTP_HX_REQUEST="true",
    )
    assert ticked.status_code == 200 and ticked["HX-Redirect"].startswith("/jobs/")
    bad = client.post("/tables/pairs/bulk/", {"scope": "selected", "action": "accept"})
    assert bad.status_code == 302 and bad["Location"].startswith("/tables/pairs/")
    assert "Select at least one row" in client.get(bad["Location"]).content.decode()


def test_the_api_takes_ids_or_a_filter_and_answers_202_with_the_job(client, coordinator, reviewer, annotator):
    pairs = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(2)]
    _, key = api_token_create(user=coordinator, name="bulk")
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"}
    by_ids = client.post(
        "/api/pairs/bulk/", {"ids": [pairs[0].pk], "action": "accept"}, content_type="application/json", **auth
    )
    assert by_ids.status_code == 202 and by_ids.json()["kind"] == "bulk" and by_ids.json()["total"] == 1
    by_filter = client.post(
        "/api/pairs/bulk/",
        {"filter": {"status": "submitted", "annotator": "alice"}, "action": "reject", "reason": "too easy"},
        content_type="application/json",
        **auth,
    )
    assert by_filter.status_code == 202 and by_filter.json()["total"] == 2
    bad = client.post(
        "/api/pairs/bulk/", {"filter": {"status": "x"}, "action": "accept"}, content_type="application/json", **auth
    )
    assert bad.status_code == 400 and "status" in bad.json()["errors"]
    none = {"filter": {"status": "failed"}, "action": "release"}
    videos = client.post("/api/videos/bulk/", none, content_type="application/json", **auth)
    assert videos.status_code == 400 and "No videos match" in videos.json()["detail"]
    _, rita = api_token_create(user=reviewer, name="r")
    refused = client.post(
        "/api/pairs/bulk/",
        {"ids": [pairs[1].pk], "action": "accept"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {rita}",
    )
    assert refused.status_code == 403


def test_a_user_filter_names_the_missing_user_in_the_api(client, coordinator):
    make_user("zed", "annotator")
    _, key = api_token_create(user=coordinator, name="bulk")
    response = client.post(
        "/api/videos/bulk/",
        {"ids": [1], "action": "assign", "target": "ghost"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    assert response.status_code == 400 and "There is no user 'ghost'" in response.json()["errors"]["target"][0]


def test_an_export_notes_each_pairs_split_for_the_split_filter(db, tmp_path, settings):
    from annotator.export.services import ExportOptions, benchmark_export
    from tests import export_fixtures

    settings.EXPORT_ROOT = tmp_path
    exported = [export_fixtures.make_pair() for _ in range(6)]
    waiting = export_fixtures.make_pair(status=Pair.Status.SUBMITTED)
    result = benchmark_export(options=ExportOptions(out=str(tmp_path / "a"), val_fraction=0.5, reproducible=True))
    val, test = ids(PAIRS, {"split": "val"}), ids(PAIRS, {"split": "test"})
    assert len(val) == result["splits"]["val"] and len(test) == result["splits"]["test"] and val and test
    assert sorted(val + test) == pk(*exported) and ids(PAIRS, {"split": "none"}) == [waiting.pk]
    benchmark_export(options=ExportOptions(out=str(tmp_path / "b"), val_fraction=0.0, reproducible=True))
    assert ids(PAIRS, {"split": "val"}) == [] and ids(PAIRS, {"split": "test"}) == pk(*exported)  # the latest export


def test_the_pairs_table_counts_regions_and_marks_them_on_the_thumbnails(client_for, reviewer, pairs):
    page = client_for(reviewer).get("/tables/pairs/", {"regions": "yes"})
    html = page.content.decode()
    assert page.status_code == 200
    assert 'title="difference regions marked on image 1 and 2">2</td>' in html
    # 160×120 images in a 48×36 thumbnail: a scale of 0.3; a box too small to see is drawn 2 px wide.
    assert 'class="rg-mark rg-mark-1" style="left:0.0px;top:0.0px;width:2px;height:2px"' in html
    assert 'class="rg-mark rg-mark-2" style="left:24.0px;top:18.0px;width:24.0px;height:18.0px"' in html
    assert html.count('class="rg-mark ') == 2
