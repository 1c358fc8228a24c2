"""Pair mining as a job: the service writes mined candidates once (resume, skips), the page and the command start it,
and the data manager's Candidates table filters them and dismisses them in bulk."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.datamanager.bulk import bulk_run_unit, bulk_start
from annotator.jobs.services import UnitRef, job_cancel
from annotator.mining.services import VIDEOS, mining_run, mining_start
from annotator.models import Collection, Domain, EmbeddingModel, Job, JobTask, Pair, PairCandidate
from annotator.similarity import mining
from annotator.similarity.services import current_fingerprint, embedding_model_forget_cached
from subtlebench.errors import Forbidden, Invalid
from tests.factories import make_image, make_video
from tests.similarity_fixtures import store_embedding, vector_with_similarity

pytestmark = [pytest.mark.django_db, pytest.mark.torch]


def collection_world():
    """A collection of 8 images in two classes. Similar to image 0: image 1 (0.93), 2 (0.88), 3 (0.999, a near
    duplicate); image 5 to image 4 (0.9, the other class); 6 and 7 are far from everything."""
    collection = Collection.objects.create(name="mvtec", domain=Domain.INDUSTRIAL, layout="mvtec", location="/x")
    rng = np.random.default_rng(0)
    base, other = rng.normal(size=64), rng.normal(size=64)
    vectors = [
        base,
        vector_with_similarity(base, 0.93, seed=1),
        vector_with_similarity(base, 0.88, seed=2),
        vector_with_similarity(base, 0.999, seed=3),
        other,
        vector_with_similarity(other, 0.9, seed=4),
        rng.normal(size=64),
        rng.normal(size=64),
    ]
    images = []
    for at, vector in enumerate(vectors):
        image = make_image(shift=at, source="mvtec")
        image.collection, image.label = collection, "bottle" if at < 4 else "screw"
        image.save()
        store_embedding(image, vector)
        images.append(image)
    return collection, images


def run_unit(job: Job, celery_id: str = "first") -> Job:
    unit = job.tasks.get()
    mining_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id=f"{celery_id}{unit.pk}"))
    job.refresh_from_db()
    return job


def mined_pairs(job: Job) -> set[tuple[int, int]]:
    return set(PairCandidate.objects.filter(job=job).values_list("image_1_id", "image_2_id"))


def test_it_writes_the_pairs_in_range_as_mined_candidates_with_their_provenance(coordinator):
    collection, images = collection_world()
    job = mining_start(user=coordinator, scope=str(collection.pk), k=0)
    assert job.kind == Job.Kind.MINE and job.tasks.get().name == "annotator.tasks.mine_pairs"
    job = run_unit(job)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    ids = [image.pk for image in images]
    expected = {(ids[0], ids[1]), (ids[0], ids[2]), (ids[1], ids[2]), (ids[4], ids[5])}
    # 1-2 is about 0.82 or more (both near 0); 0-3 is a near duplicate and 6, 7 are far: not candidates.
    found = mined_pairs(job)
    assert (ids[0], ids[3]) not in found and expected <= found
    candidate = PairCandidate.objects.get(job=job, image_1=images[0], image_2=images[1])
    assert candidate.origin == PairCandidate.Origin.MINED and candidate.status == PairCandidate.Status.OPEN
    assert candidate.similarity == pytest.approx(0.93, abs=1e-3)
    assert candidate.similarity_model == current_fingerprint()
    assert (candidate.collection, candidate.domain, candidate.source) == (collection, Domain.INDUSTRIAL, "mvtec")
    assert job.result["candidates"] == len(found) and job.result["images"] == 8


def test_a_candidate_of_two_sources_is_mixed_and_frames_have_no_collection_and_their_videos_domain(coordinator):
    collection, images = collection_world()
    images[1].source = "visa"
    images[1].save()
    job = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=0))
    mixed = PairCandidate.objects.get(job=job, image_1=images[0], image_2=images[1])
    same = PairCandidate.objects.get(job=job, image_1=images[0], image_2=images[2])
    assert (mixed.collection, mixed.domain, mixed.source) == (collection, Domain.INDUSTRIAL, "mixed")
    assert (same.collection, same.domain, same.source) == (collection, Domain.INDUSTRIAL, "mvtec")
    video = make_video(frames=2, domain=Domain.MEDICAL)
    frames = [frame.image for frame in video.frames.order_by("index")]
    base = np.random.default_rng(3).normal(size=64)
    store_embedding(frames[0], base)
    store_embedding(frames[1], vector_with_similarity(base, 0.9, seed=5))
    framed = PairCandidate.objects.get(job=run_unit(mining_start(user=coordinator, scope=VIDEOS, k=0)))
    assert (framed.collection, framed.domain) == (None, Domain.MEDICAL)


def test_diversity_and_the_class_filter_reach_the_candidates(coordinator):
    collection, images = collection_world()
    job = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=1, same_label=True))
    ids = [image.pk for image in images]
    # Image 0's best is 1 (0.93); then 2 may not pair with 0 or 1 (each used once) but with 3 (about 0.88, 3 being
    # a near duplicate of 0); 4-5 is of one class. Without the limit 0-2 and 1-2 are candidates too.
    assert mined_pairs(job) == {(ids[0], ids[1]), (ids[2], ids[3]), (ids[4], ids[5])}


def test_it_skips_pairs_already_candidates_in_either_order_or_already_pairs(coordinator):
    collection, images = collection_world()
    PairCandidate.objects.create(
        image_1=images[1], image_2=images[0], origin="given", domain=Domain.INDUSTRIAL, source="mvtec"
    )
    video = make_video(frames=2)
    Pair.objects.create(
        image_1=images[2],
        image_2=images[0],
        video=video,
        category="state",
        domain="industrial",
        source="mvtec",
        source_id="x",
        question="q?",
        answer="a",
        distractors=["b"],
    )
    job = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=0))
    found = mined_pairs(job)
    ids = [image.pk for image in images]
    assert (ids[0], ids[1]) not in found and (ids[0], ids[2]) not in found
    assert (ids[4], ids[5]) in found
    assert PairCandidate.objects.filter(image_1=images[0], image_2=images[1]).count() == 0  # no second row


def test_a_unit_run_again_after_its_worker_died_goes_on_without_a_duplicate(coordinator, settings):
    collection, images = collection_world()
    job = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=0))
    complete = mined_pairs(job)
    assert len(complete) >= 4
    # What a worker killed while writing leaves: the unit running under a heartbeat that stopped, the job running,
    # and only the first candidates written.
    unit = job.tasks.get()
    first_rows = PairCandidate.objects.filter(job=job).order_by("-similarity", "pk")
    PairCandidate.objects.filter(pk__in=[c.pk for c in list(first_rows)[2:]]).delete()
    JobTask.objects.filter(pk=unit.pk).update(status=JobTask.Status.RUNNING, heartbeat="2020-01-01T00:00Z")
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING, finished=None)
    job = run_unit(job, celery_id="second")
    assert job.status == Job.Status.SUCCEEDED
    assert mined_pairs(job) == complete
    assert PairCandidate.objects.filter(job=job).count() == len(complete)
    assert job.result["written_now"] == len(complete) - 2
    assert job.tasks.get().attempts == 2


def test_a_second_run_of_the_same_scope_adds_nothing(coordinator):
    collection, _ = collection_world()
    first = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=0))
    second = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=0))
    assert first.result["candidates"] >= 4 and second.result["candidates"] == 0
    assert second.status == Job.Status.SUCCEEDED


def test_a_cancelled_job_writes_nothing(coordinator):
    collection, _ = collection_world()
    job = mining_start(user=coordinator, scope=str(collection.pk))
    job_cancel(job=job, user=coordinator)
    unit = job.tasks.get()
    assert mining_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id="c")) is None
    assert not PairCandidate.objects.filter(job=job).exists()


def test_without_an_active_model_the_job_fails_and_says_why(coordinator):
    collection, _ = collection_world()
    job = mining_start(user=coordinator, scope=str(collection.pk))
    EmbeddingModel.objects.update(active=False)
    embedding_model_forget_cached()
    job = run_unit(job)
    assert job.status == Job.Status.FAILED and "no embedding model is active" in job.errors[-1]


def test_video_scope_mines_across_videos_and_honours_the_gap(coordinator):
    one, two = make_video(frames=3), make_video(frames=1)
    frames = [f.image for f in one.frames.order_by("index")] + [two.frames.get().image]
    rng = np.random.default_rng(9)
    base = rng.normal(size=64)
    for at, image in enumerate(frames):
        store_embedding(image, vector_with_similarity(base, 0.9, seed=at) if at else base)
    # Frames 0, 1, 2 of one video at 0, 1, 2 s; frame 3 of another video. Every pair is in range.
    job = run_unit(mining_start(user=coordinator, scope=VIDEOS, k=0, min_gap=1.5))
    ids = [image.pk for image in frames]
    found = mined_pairs(job)
    assert (ids[0], ids[1]) not in found and (ids[1], ids[2]) not in found  # 1 s apart in one video
    assert (ids[0], ids[2]) in found and (ids[0], ids[3]) in found  # 2 s apart; across videos
    across = run_unit(mining_start(user=coordinator, scope=VIDEOS, k=0, across_videos_only=True))
    assert {(a, b) for a, b in mined_pairs(across)} <= {(i, ids[3]) for i in ids[:3]}
    assert PairCandidate.objects.get(image_1_id=ids[0], image_2_id=ids[3]).domain == one.domain


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"scope": "nope"}, "scope"),
        ({"scope": "99999"}, "scope"),
        ({"scope": VIDEOS, "k": -1}, "k"),
        ({"scope": VIDEOS, "threshold": 0.9, "ceiling": 0.85}, "ceiling"),
        ({"scope": VIDEOS, "threshold": "x"}, "threshold"),
        ({"scope": VIDEOS, "across_videos_only": True, "min_gap": 3}, "min_gap"),
    ],
)
def test_bad_options_are_refused_naming_the_field(coordinator, options, field):
    with pytest.raises(Invalid) as refused:
        mining_start(user=coordinator, **options)
    assert field in refused.value.errors
    assert not Job.objects.filter(kind=Job.Kind.MINE).exists()


def test_only_a_coordinator_mines(reviewer):
    with pytest.raises(Forbidden):
        mining_start(user=reviewer, scope=VIDEOS)


def test_defaults_are_the_settings(coordinator, settings):
    settings.SIMILARITY_THRESHOLD, settings.NEAR_DUPLICATE_CEILING = 0.7, 0.99
    job = mining_start(user=coordinator, scope=VIDEOS)
    assert (job.result["options"]["threshold"], job.result["options"]["ceiling"]) == (0.7, 0.99)


# --- The command -------------------------------------------------------------------------------------------------


def test_mine_pairs_sync_writes_the_candidates_and_says_how_many(capsys):
    collection, _ = collection_world()
    call_command("mine_pairs", "--collection", "mvtec", "-k", "0", "--sync")
    job = Job.objects.get(kind=Job.Kind.MINE)
    assert job.status == Job.Status.SUCCEEDED
    assert f"{job.result['candidates']} candidates from 8 embedded images" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no collection of this name"):
        call_command("mine_pairs", "--collection", "nope")
    with pytest.raises(CommandError, match="ceiling"):
        call_command("mine_pairs", "--videos", "--threshold", "0.9", "--ceiling", "0.5")


# --- The page -------------------------------------------------------------------------------------------------


def test_the_page_is_for_coordinators(client, client_for, reviewer, annotator):
    assert client.get("/mining/").status_code == 302
    assert client_for(reviewer).get("/mining/").status_code == 403
    assert client_for(annotator).post("/mining/", {"scope": VIDEOS}).status_code == 403


def test_the_page_refuses_wrong_methods(client_for, coordinator):
    assert client_for(coordinator).put("/mining/").status_code == 405


def test_the_page_starts_a_job_and_goes_to_it(client_for, coordinator):
    collection, _ = collection_world()
    page = client_for(coordinator).get("/mining/")
    assert page.status_code == 200 and b"Collection mvtec" in page.content
    response = client_for(coordinator).post(
        "/mining/", {"scope": str(collection.pk), "k": "3", "same_label": "on", "idempotency_key": "k1"}
    )
    job = Job.objects.get(kind=Job.Kind.MINE)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.result["options"]["k"] == 3 and job.result["options"]["same_label"] is True
    again = client_for(coordinator).post("/mining/", {"scope": str(collection.pk), "k": "3", "idempotency_key": "k1"})
    assert again["Location"] == f"/jobs/{job.pk}/" and Job.objects.filter(kind=Job.Kind.MINE).count() == 1


def test_a_refused_form_comes_back_with_the_reason(client_for, coordinator):
    client = client_for(coordinator)
    response = client.post("/mining/", {"scope": VIDEOS, "k": "2", "threshold": "0.9", "ceiling": "0.5"})
    assert response.status_code == 302 and response["Location"] == "/mining/"
    page = client.get("/mining/")
    assert "must be above the threshold" in page.content.decode()
    assert not Job.objects.filter(kind=Job.Kind.MINE).exists()


# --- The Candidates table ----------------------------------------------------------------------------------------


def test_the_candidates_table_filters_by_origin_status_collection_and_similarity(client_for, coordinator, reviewer):
    collection, images = collection_world()
    job = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=0))
    given = PairCandidate.objects.create(
        image_1=images[6], image_2=images[7], origin="given", domain=Domain.AERIAL, source="levir"
    )
    client = client_for(reviewer)
    everything = client.get("/tables/candidates/")
    assert everything.status_code == 200
    total = PairCandidate.objects.count()
    assert f'<strong class="dm-total">{total}</strong>' in everything.content.decode()
    mined = client.get("/tables/candidates/?origin=mined&collection=mvtec&similarity_min=0.92")
    rows = list(mined.context["page"])
    assert rows and all(r.origin == "mined" and r.similarity >= 0.92 for r in rows)
    assert given.pk not in [r.pk for r in rows]
    assert [r.similarity for r in rows] == sorted((r.similarity for r in rows), reverse=True)
    by_job = client.get(f"/tables/candidates/?job={job.pk}&sort=-similarity")
    assert len(list(by_job.context["page"])) == job.result["candidates"]
    bad = client.get("/tables/candidates/?collection=nope&origin=found")
    assert bad.status_code == 400
    assert "there is no collection" in bad.content.decode() and "is not one of" in bad.content.decode()


def test_bulk_dismiss_closes_open_candidates_and_refuses_the_others(coordinator):
    collection, images = collection_world()
    job = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=0))
    rows = list(PairCandidate.objects.filter(job=job).order_by("pk"))
    PairCandidate.objects.filter(pk=rows[0].pk).update(status=PairCandidate.Status.AUTHORED)
    bulk = bulk_start(table="candidates", action="dismiss", by=coordinator, filter={"job": str(job.pk)})
    unit = bulk.tasks.get()
    bulk_run_unit(job_id=bulk.pk, ids=unit.kwargs["ids"], unit=UnitRef(unit.pk, celery_id="b"))
    bulk.refresh_from_db()
    assert bulk.status == Job.Status.SUCCEEDED
    assert bulk.result["ok"] == len(rows) - 1 and bulk.result["refused"] == 1
    assert "only an open candidate can be dismissed" in bulk.errors[0]
    dismissed = PairCandidate.objects.filter(job=job, status=PairCandidate.Status.DISMISSED)
    assert dismissed.count() == len(rows) - 1 and all(c.dismissed_by == coordinator for c in dismissed)


def test_bulk_dismiss_from_the_page_goes_to_its_job(client_for, coordinator, reviewer):
    collection, images = collection_world()
    job = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=0))
    ids = list(PairCandidate.objects.filter(job=job).values_list("pk", flat=True)[:2])
    assert client_for(reviewer).post("/tables/candidates/bulk/", {"ids": ids, "action": "dismiss"}).status_code == 403
    form = {"ids": [str(i) for i in ids], "action": "dismiss", "scope": "selected"}
    preview = client_for(coordinator).post("/tables/candidates/bulk/", form)  # a preview first: nothing runs
    assert preview.status_code == 200 and not Job.objects.filter(kind=Job.Kind.BULK).exists()
    response = client_for(coordinator).post("/tables/candidates/bulk/", {**form, "confirm": "yes"})
    bulk = Job.objects.get(kind=Job.Kind.BULK)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{bulk.pk}/"
    assert bulk.result["table"] == "candidates" and bulk.total == 2


def test_the_candidates_table_takes_at_most_10_queries_with_many_rows(
    client_for, coordinator, django_assert_max_num_queries
):
    collection = Collection.objects.create(name="many", domain=Domain.AERIAL, layout="images", location="/x")
    images = [make_image(shift=n % 8, source="levir") for n in range(61)]
    PairCandidate.objects.bulk_create(
        PairCandidate(
            image_1=images[0], image_2=image, origin="given", collection=collection, domain="aerial", source="levir"
        )
        for image in images[1:]
    )
    client = client_for(coordinator)
    client.get("/tables/candidates/")  # the session's first queries (login) are not the page's
    with django_assert_max_num_queries(10):
        response = client.get("/tables/candidates/?collection=many&sort=-created")
    assert response.status_code == 200
    assert response.content.decode().count("<tr>") > 40


def clustered_collection(count: int = 120):
    """A collection shaped like a corpus (clusters, near-duplicates, singletons): many pairs in range, shared images."""
    from annotator.similarity.synthetic_vectors import clustered_vectors

    collection = Collection.objects.create(name="clusters", domain=Domain.NATURAL, layout="plain", location="/c")
    halves, _ = clustered_vectors(count, dim=64, seed=9)
    for at, vector in enumerate(halves):
        image = make_image(shift=at, source="plain")
        image.collection = collection
        image.save()
        store_embedding(image, vector.astype(np.float32))
    return collection


def run_every_unit(job: Job) -> list[JobTask]:
    """Run the job's waiting units, and the units they add, until none waits (what workers do); the units run."""
    done = []
    while unit := job.tasks.filter(status__in=(JobTask.Status.PENDING, JobTask.Status.QUEUED)).order_by("pk").first():
        part = {name: unit.kwargs[name] for name in ("block", "merge") if name in unit.kwargs}
        mining_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id=f"c{unit.pk}"), **part)
        done.append(unit)
    job.refresh_from_db()
    return done


@pytest.mark.parametrize("bounds_from", [None, 20])
def test_a_job_spread_over_block_pairs_writes_exactly_what_one_worker_writes(
    coordinator, settings, monkeypatch, bounds_from
):
    """The single worker multiplies every tile; the block pairs too, or (bounds_from) skip the tiles that coarse
    groups' bounds rule out: the same candidates either way."""
    collection = clustered_collection()
    settings.MINING_BLOCK_ROWS = 1000
    single = run_unit(mining_start(user=coordinator, scope=str(collection.pk), k=2))
    expected = set(PairCandidate.objects.filter(job=single).values_list("image_1_id", "image_2_id", "similarity"))
    assert single.status == Job.Status.SUCCEEDED and len(expected) > 60 and single.result["in_range"] > len(expected)
    PairCandidate.objects.filter(job=single).delete()  # else the second job leaves them out as candidates already

    settings.MINING_BLOCK_ROWS = 32  # 4 blocks: 10 block pairs
    if bounds_from is not None:
        monkeypatch.setattr(mining, "PRUNE_FROM", bounds_from)
    job = mining_start(user=coordinator, scope=str(collection.pk), k=2)
    first = job.tasks.get()
    mining_run(job_id=job.pk, unit=UnitRef(first.pk, celery_id="plan"))
    blocks = job.tasks.exclude(pk=first.pk)
    assert sorted(tuple(unit.kwargs["block"]) for unit in blocks) == [(i, j) for i in range(4) for j in range(i, 4)]
    for unit in blocks.order_by("-pk"):  # in any order
        mining_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id=f"c{unit.pk}"), block=unit.kwargs["block"])
    job.refresh_from_db()
    assert job.mined_blocks.count() == 10 and job.status == Job.Status.RUNNING
    merge = job.tasks.get(kwargs__merge=True)  # added by the last block pair to finish
    run_every_unit(job)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert set(PairCandidate.objects.filter(job=job).values_list("image_1_id", "image_2_id", "similarity")) == expected
    assert job.result["in_range"] == single.result["in_range"] and job.result["units"] == 10
    assert (job.done, job.total) == (11, 11) and not job.mined_blocks.exists()
    assert JobTask.objects.get(pk=merge.pk).status == JobTask.Status.DONE


def test_the_merge_holds_no_python_object_per_image_while_it_writes(coordinator, settings, monkeypatch):
    """What the merge's worker kept after the job (tens of MB) were the Python objects it made per image and per pair,
    whose memory arenas a few surviving objects pinned: while it writes, the writing code holds one chunk's rows and
    arrays, not an object per image (Python objects only, as tracemalloc counts them: numpy's buffers are apart)."""
    import tracemalloc

    from annotator.mining import services

    collection = clustered_collection()
    settings.MINING_BLOCK_ROWS = 32
    job = mining_start(user=coordinator, scope=str(collection.pk), k=2)
    first = job.tasks.get()
    mining_run(job_id=job.pk, unit=UnitRef(first.pk, celery_id="plan"))
    for unit in job.tasks.exclude(pk=first.pk).order_by("pk"):
        mining_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id=f"c{unit.pk}"), block=unit.kwargs["block"])
    merge = job.tasks.get(kwargs__merge=True)
    monkeypatch.setattr(services, "WRITE_CHUNK", 1)
    held = []
    bulk_create = PairCandidate.objects.bulk_create

    def measured(rows, **options):
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.DomainFilter(True, 0)])
        snapshot = snapshot.filter_traces([tracemalloc.Filter(True, services.__file__)])
        held.append(sum(stat.size for stat in snapshot.statistics("filename")))
        return bulk_create(rows, **options)

    monkeypatch.setattr(PairCandidate.objects, "bulk_create", measured)
    tracemalloc.start(1)
    try:
        mining_run(job_id=job.pk, unit=UnitRef(merge.pk, celery_id="merge"), merge=True)
    finally:
        tracemalloc.stop()
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert len(held) == job.result["candidates"] > 60
    # A fixed few KB (3.2 here); a dict of (collection, source, domain) per image named took 130 bytes an image (11 KB).
    assert max(held) < 6000, held


@pytest.mark.django_db(transaction=True)
def test_a_unit_closes_its_database_connection_when_it_ends(coordinator, settings):
    """libpq keeps its buffers as large as the largest message: a block pair's arrays travel as one row, which kept
    the worker 30 MB above idle after a block pair or the merge until the connection was closed."""
    from django.db import connection

    collection = clustered_collection(40)
    settings.MINING_BLOCK_ROWS = 32
    job = mining_start(user=coordinator, scope=str(collection.pk), k=2)
    first = job.tasks.get()
    mining_run(job_id=job.pk, unit=UnitRef(first.pk, celery_id="plan"))
    for unit in job.tasks.exclude(pk=first.pk).order_by("pk"):
        assert Job.objects.filter(pk=job.pk).exists() and connection.connection is not None
        mining_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id=f"c{unit.pk}"), block=unit.kwargs["block"])
        assert connection.connection is None  # closed at the unit's end; the next query opens another
    merge = job.tasks.get(kwargs__merge=True)
    mining_run(job_id=job.pk, unit=UnitRef(merge.pk, celery_id="merge"), merge=True)
    assert connection.connection is None
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.errors
