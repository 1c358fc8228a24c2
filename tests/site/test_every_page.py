"""Every page renders: each URL pattern, reversed with real objects, opened as each role (and as htmx asks for its
partials), answers without a server error, and no template prints a dict method where it meant a value.

Among the objects is a finished job of every kind (import, similarity, export), one that succeeded and one that
failed, each made by the service that runs it, so `/jobs/<id>/` shows the results as the real jobs write them.
"""

from __future__ import annotations

import re
import shutil

import pytest
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from annotator.collections.services import collection_import
from annotator.datamanager.bulk import bulk_run_unit, bulk_start
from annotator.export.services import ExportOptions, export_run, export_start, export_zip_run, export_zip_start
from annotator.export.training import training_set_create
from annotator.jobs.services import UnitRef
from annotator.models import (
    CandidateSkip,
    Caption,
    CaptionBatch,
    CaptionSkip,
    CaptionTask,
    Collection,
    DoubleReview,
    ImageEdit,
    Job,
    Pair,
    PairCandidate,
    Release,
    VideoSkip,
)
from annotator.picking import services as picking
from annotator.picking.guidelines import guideline_save
from annotator.similarity.services import embedding_job_create, embeddings_compute
from annotator.videos.services import videos_import
from evaluation.models import OtherBenchmark, OtherBenchmarkScore
from evaluation.studies import participation
from evaluation.studies import services as studies
from evaluation.studies.participant_views import image_url
from subtlebench.tokens import api_token_create
from tests import collection_fixtures, export_fixtures
from tests.conftest import built_once, make_user, suite_settings
from tests.factories import make_candidate, make_pair, make_video
from tests.video_fixtures import *  # noqa: F403 (fixtures)

pytestmark = [pytest.mark.django_db, pytest.mark.torch]

ROLES = ["anonymous", "stranger", "annotator", "reviewer", "coordinator"]
# The admin has its own tests (test_admin.py); its URL patterns take Django's own arguments.
SKIPPED_PREFIXES = ("admin/",)
# What a template prints when it looked up a dict's key and found the dict's method instead.
METHOD_REPR = re.compile(rb"&lt;(bound|built-in) method|<(bound|built-in) method")


def all_patterns(patterns=None, prefix: str = ""):
    """(route, pattern) for every URL pattern, includes walked."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from all_patterns(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern


def finished_jobs(coordinator, h264_video, tmp_path) -> list[Job]:
    """A succeeded and a failed job of every kind, each run by its own service."""
    jobs = [videos_import(source=str(h264_video.parent), count=3, created_by=coordinator, sync=True)]
    broken = tmp_path / "broken" / "broken.mp4"
    broken.parent.mkdir()
    broken.write_bytes(b"not a video")
    jobs.append(videos_import(source=str(broken.parent), count=3, created_by=coordinator, sync=True))
    # The imported frames, embedded by the tiny test model.
    jobs.append(embeddings_compute(job=embedding_job_create(title="Similarity: embed", user=coordinator)))
    with override_settings(DINOV3_MODEL_DIR=str(tmp_path / "no-such-model")):  # this worker cannot read the weights
        jobs.append(embeddings_compute(job=embedding_job_create(title="Similarity: no weights", user=coordinator)))
    export_fixtures.make_pair()
    # The export that succeeds is published as release v1 (/releases/v1/).
    options = ExportOptions(out=str(tmp_path / "exports" / "ok"), reproducible=True, release=True)
    ok = export_run(job_id=export_start(options=options, user=coordinator).pk)
    # One that fails: a file is in the way of its folder by the time it runs.
    later = tmp_path / "exports" / "later"
    later.mkdir(parents=True)
    job = export_start(options=ExportOptions(out=str(later / "bench")), user=coordinator)
    later.rmdir()
    later.write_text("not a folder")
    jobs += [ok, export_run(job_id=job.pk)]
    # Zips: one whose export's folder went away before its worker ran (failed), one built (succeeded).
    gone = export_run(
        job_id=export_start(options=ExportOptions(out=str(tmp_path / "exports" / "gone")), user=coordinator).pk
    )
    failed_zip = export_zip_start(job=gone, user=coordinator)
    shutil.rmtree(tmp_path / "exports" / "gone")
    jobs += [
        gone,
        export_zip_run(job_id=failed_zip.pk),
        export_zip_run(job_id=export_zip_start(job=ok, user=coordinator).pk),
    ]
    # Bulk: one that went through, one whose every pair was refused (below the similarity bar).
    for similarity in (0.95, 0.1):
        pair = make_pair(status=Pair.Status.SUBMITTED, similarity=similarity)
        job = bulk_start(table="pairs", action="accept", by=coordinator, ids=[pair.pk])
        unit = job.tasks.get()
        bulk_run_unit(job_id=job.pk, ids=unit.kwargs["ids"], unit=UnitRef(unit.pk, celery_id=f"c{unit.pk}"))
        jobs.append(job)
    jobs += mining_jobs(coordinator)
    jobs += model_eval_jobs(coordinator)
    # Image collections (issue 27): an import that made candidates, and one whose every file was bad.
    levir = collection_fixtures.levir_folder(tmp_path / "levir")
    jobs.append(
        collection_import(source=str(levir), name="levir_cd", domain="aerial", created_by=coordinator, sync=True)
    )
    bad = tmp_path / "bad_collection"
    (bad / "A").mkdir(parents=True)
    (bad / "B").mkdir()
    (bad / "A/x.png").write_bytes(b"not an image")
    (bad / "B/x.png").write_bytes(b"not an image")
    jobs.append(collection_import(source=str(bad), name="bad", domain="medical", created_by=coordinator, sync=True))
    jobs += sweep_jobs(coordinator)
    jobs += edit_jobs(coordinator)
    outcomes = {(job.kind, job.status) for job in Job.objects.filter(pk__in=[job.pk for job in jobs])}
    assert outcomes == {(kind, status) for kind in Job.Kind.values for status in ("succeeded", "failed")}, outcomes
    return jobs


def mining_jobs(coordinator) -> list[Job]:
    """A mining run over every video that succeeded, and one whose model was switched off before it ran (failed)."""
    from annotator.jobs.services import UnitRef
    from annotator.mining.services import VIDEOS, mining_run, mining_start
    from annotator.models import EmbeddingModel
    from annotator.similarity.services import embedding_model_forget_cached

    jobs = []
    active = EmbeddingModel.objects.get(active=True)
    for switched_off in (False, True):
        job = mining_start(user=coordinator, scope=VIDEOS, k=2)
        if switched_off:
            EmbeddingModel.objects.filter(pk=active.pk).update(active=False)
            embedding_model_forget_cached()
        unit = job.tasks.get()
        mining_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id=f"m{unit.pk}"))
        jobs.append(job)
    EmbeddingModel.objects.filter(pk=active.pk).update(active=True)
    embedding_model_forget_cached()
    return jobs


def sweep_jobs(coordinator) -> list[Job]:
    """A synthetic sweep generated (succeeded) and one whose unit was given up (its worker lost: failed)."""
    from annotator.jobs.services import job_task_abandon, job_task_claim
    from annotator.synthetic.services import sweep_create
    from tests.synthetic.sweep_fixtures import run_units

    axes = [{"factor": "object_size", "levels": [10, 20]}]
    made = sweep_create(user=coordinator, family="quantity", axes=axes, items_per_cell=1, size=96, send=False)
    run_units(made)
    lost = sweep_create(user=coordinator, family="spatial", axes=axes, items_per_cell=1, size=96, send=False)
    unit = lost.job.tasks.order_by("pk").first()
    job_task_claim(unit=UnitRef(unit.pk, celery_id="lost", worker="gone"))  # its worker then vanished
    unit.refresh_from_db()
    job_task_abandon(task=unit, reason="its worker stopped beating")
    return [made.job, Job.objects.get(pk=lost.job_id)]


def edit_jobs(coordinator) -> list[Job]:
    """An edit job that made an edit to check and failed an image (the fake editing server refused it), and one whose
    editing model was deleted before it ran (failed)."""
    from annotator.editing.services import edit_job_run, edit_job_start
    from annotator.models import ModelEndpoint
    from tests.editing.edit_fixtures import make_collection
    from tests.editing.edit_server import EditServer

    collection, images = make_collection([10, 30], name="edited")
    server = EditServer().start()
    server.faults[30] = "refuse"
    jobs = []
    try:
        for deleted in (False, True):
            endpoint = ModelEndpoint.objects.create(
                name=f"editor-{deleted}", base_url=server.base_url, model_id="edit-1", timeout_s=5
            )
            job = edit_job_start(
                user=coordinator,
                collection_id=collection.pk,
                kind="colour",
                endpoint_id=endpoint.pk,
                image_ids=[image.pk for image in images],
                object_name="ball",
                value="red",
            )
            if deleted:
                endpoint.delete()
            edit_job_run(job_id=job.pk, unit=UnitRef(job.tasks.get().pk, celery_id=f"e{job.pk}"))
            jobs.append(job)
    finally:
        server.stop()
    return jobs


def model_eval_jobs(coordinator) -> list[Job]:
    """A model run that succeeded (the local model server) and one whose endpoint is down (the server stopped)."""
    from annotator.llm.endpoints import endpoint_create
    from annotator.models import Release, ReleaseItem
    from evaluation.runs.services import evaluation_run, evaluation_start
    from tests.model_server import ModelServer

    server = ModelServer().start()
    runs = []
    try:
        endpoint = endpoint_create(user=coordinator, name="pages", base_url=server.base_url, model_id="tiny-vlm")
        # On release v1, whose images are all there (a pair with a deleted image would leave its item unanswered,
        # and the run incomplete).
        release = Release.objects.order_by("pk").first()
        split = ReleaseItem.objects.filter(release=release).order_by("pk").values_list("split", flat=True).first()
        runs.append(
            evaluation_start(endpoint=endpoint, user=coordinator, source="release", release=release, split=split)
        )
        evaluation_run(evaluation_id=runs[0].pk)
    finally:
        server.stop()
    down = endpoint_create(user=coordinator, name="down", base_url=server.base_url, model_id="tiny-vlm")
    runs.append(evaluation_start(endpoint=down, user=coordinator, release=release, split=split))
    with override_settings(MODEL_EVAL_PAUSE_MAX_SECONDS=0):  # down: failed at once, not paused
        evaluation_run(evaluation_id=runs[1].pk)
    return [run.job for run in runs]


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory, tiny_dinov3_dir, h264_master):  # noqa: F811
    """Users of every role and an object for every kind of URL argument, built once for the module's tests (each
    role's test runs in a savepoint of it, `built_once`); with the settings that point at its files."""
    folder = tmp_path_factory.mktemp("pages")
    with built_once(django_db_blocker, folder, tiny_dinov3_dir):
        users, values = build_world(folder, h264_master)
        folders = {"MEDIA_ROOT", "VAR_DIR", "EXPORT_ROOT", "IMPORT_ROOTS"}
        yield users, values, {name: value for name, value in suite_settings(folder).items() if name in folders}


def build_world(tmp_path, master_video):
    video_file = tmp_path / "videos" / "clip.mp4"
    video_file.parent.mkdir(parents=True)
    video_file.write_bytes(master_video.read_bytes())
    users = {role: make_user(role, role) for role in ("annotator", "reviewer", "coordinator")}
    users["stranger"] = make_user("stranger")
    author = make_user("author", "annotator")
    jobs = finished_jobs(users["coordinator"], video_file, tmp_path)
    video = make_video(frames=3)
    submitted = make_pair(status=Pair.Status.SUBMITTED, author=author, video=video)
    accepted = [make_pair() for _ in range(6)]
    batch = CaptionBatch.objects.create(title="Batch", selection=CaptionBatch.Selection.ALL, created_by=author)
    task = CaptionTask.objects.create(batch=batch, pair=accepted[0], slot=1)
    caption = Caption.objects.create(
        pair=accepted[1], author=author, text="The red square moved a little to the right.", status="submitted"
    )
    study = studies.study_create(name="Pages", fraction=0.5, practice_count=1, open_cap=5)
    invited = studies.participant_create(study=study)
    practising = studies.participant_create(study=study)
    practising.consent()
    practice = participation.participant_next_practice(participant=practising)
    scored = studies.participant_create(study=study)
    scored.consent()
    while (assignment := participation.participant_next_practice(participant=scored)) is not None:
        participation.assignment_answer(participant=scored, token=assignment.token, position=1)
    item = participation.participant_next_item(participant=scored)
    assert practice is not None and item is not None
    finished = studies.participant_create(study=study)
    participation.participant_answer_all(participant=finished)
    signed = image_url(item, 1).rstrip("/").rsplit("/", 1)[-1]
    token, _ = api_token_create(user=users["annotator"], name="pages")
    # A pair of the double-review sample, decided once: its blind second review waits.
    drawn = make_pair(status=Pair.Status.SUBMITTED, author=author)
    double_review = DoubleReview.objects.create(pair=drawn, pair_version=drawn.version, rate=1.0)
    picking.pair_review(pair=drawn, reviewer=make_user("first", "reviewer"), decision="accept", version=drawn.version)
    # What the annotator pages list: a skipped video, a skipped caption task, a withdrawn pair; a reopened decision.
    video_skip = VideoSkip.objects.create(video=make_video(frames=2), user=users["annotator"], reason="no_pair")
    caption_skip = CaptionSkip.objects.create(task=task, user=users["annotator"], reason="No visible difference")
    withdrawn = make_pair(status=Pair.Status.SUBMITTED, author=users["annotator"])
    picking.pair_withdraw(pair=withdrawn, user=users["annotator"])
    picking.pair_reopen(pair=accepted[3], by=users["coordinator"], reason="A second look.")
    # The authoring queue: a candidate pair of the collection imported above, one skipped by the annotator.
    candidate = PairCandidate.objects.order_by("pk").first()
    candidate_skip = CandidateSkip.objects.create(
        candidate=make_candidate(), user=users["annotator"], reason="bad_images"
    )
    training = training_set_create(release=Release.objects.get(number=1, experiment=False))
    other_benchmark = OtherBenchmark.objects.create(name="MMBench", description="Scores of the models there")
    OtherBenchmarkScore.objects.create(benchmark=other_benchmark, model="gpt-test", score=61.5)
    # A guideline of two versions (its pages, and the panel beside the editor).
    guideline_save(category="action", domain="", body="# Actions\n- one **visible** action", user=users["coordinator"])
    guideline = guideline_save(category="action", domain="", body="- one action", user=users["coordinator"]).guideline
    # A conversation: the reviewer asks the author of the submitted pair.
    from annotator.conversations.services import comment_post

    comment = comment_post(item=submitted, author=users["reviewer"], body="Which cup moved, @author?")
    return users, {
        "category": ["action", "no-such-category"],
        "domain": ["all", "natural", "no-such-domain"],
        "version_id": [guideline.current.pk],
        "comment_id": [comment.pk],
        "candidate_id": [candidate.pk],
        "edit_id": list(ImageEdit.objects.filter(job__status="succeeded").order_by("pk").values_list("pk", flat=True)),
        "kind": ["colour", "weather"],  # an edit template's kind, and one that is not
        "collection_id": list(Collection.objects.order_by("pk").values_list("pk", flat=True)),
        "action": ["rename", "archive", "unarchive", "delete"],  # the everyday actions' confirmation pages
        "double_review_id": [double_review.pk],
        "token_id": [token.pk],
        "path": ["no-such-endpoint/"],  # the API's catch-all: its JSON 404
        "video_id": [video.pk],
        "job_id": [job.pk for job in jobs],
        "table_name": ["pairs", "videos", "captions", "candidates", "no-such-table"],
        "run_id": [job.model_evaluation.pk for job in jobs if job.kind == Job.Kind.MODEL_EVAL],
        "endpoint_id": [job.model_evaluation.endpoint_id for job in jobs if job.kind == Job.Kind.MODEL_EVAL],
        "sweep_id": [job.sweeps.get().pk for job in jobs if job.kind == Job.Kind.SWEEP],
        "pair_id": [submitted.pk, accepted[2].pk],
        "task_id": [task.pk],
        "caption_id": [caption.pk],
        "skip_id": [video_skip.pk, caption_skip.pk, candidate_skip.pk],
        "pk": [study.pk],
        "token": [invited.token, practising.token, scored.token, finished.token],
        "item_token": [practice.token, item.token],
        "open_token": [study.open_token],
        "signed": [signed],
        "name": [video.frames.first().image.file.name],
        "split": ["test", "val", "train"],  # a release's report: both splits, and one there is not
        "file_name": ["v1-test-report.csv", "v1-test-gaps.svg", "no-such-file.csv"],
        "release_name": ["v1", "v99", "exp-1"],  # release v1, and ones that do not exist
        "set_id": [training.pk, training.pk + 1000],  # a release's training split, and one not there
        "benchmark_id": [other_benchmark.pk, other_benchmark.pk + 1000],  # an other benchmark, and one not there
    }


def urls_of(route: str, pattern: URLPattern, values: dict) -> list[str]:
    """The pattern reversed with each real object for its arguments (one argument varies at a time)."""
    names = list(pattern.pattern.regex.groupindex)
    if not names:
        return ["/" + route.replace("^", "").replace("$", "")]
    missing = [name for name in names if name not in values]
    assert not missing, f"{route}: no test object for {missing}; add one to the world fixture"
    from django.urls import reverse

    urls = []
    for varying in names:
        for value in values[varying]:
            kwargs = {name: values[name][0] for name in names} | {varying: value}
            urls.append(reverse(pattern.name, kwargs=kwargs) if pattern.name else None)
    return sorted({url for url in urls if url})


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)  # one test per role, so a failure names its role
def test_every_page_renders_for_every_role(client, world, role, settings):
    users, values, folders = world
    for name, folder in folders.items():  # the world's files, not this test's empty folders
        setattr(settings, name, folder)
    checked = set()
    afresh = True
    for route, pattern in all_patterns():
        if route.startswith(SKIPPED_PREFIXES):
            continue
        for url in urls_of(route, pattern, values):
            # Each URL starts with the role's own session and no cookie but the CSRF one: a page that set or ended
            # another (a participant's session, a logout) makes the next URL log in afresh.
            if afresh:
                client.logout()
                if role != "anonymous":
                    client.force_login(users[role])
            afresh = False
            for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
                response = client.get(url, **headers)
                afresh = afresh or bool(set(response.cookies) - {settings.CSRF_COOKIE_NAME})
                assert response.status_code < 500, f"{role} GET {url}: {response.status_code}"
                if response.get("Content-Type", "").startswith("text/html"):
                    body = b"".join(response) if response.streaming else response.content
                    assert not METHOD_REPR.search(body), f"{role} GET {url} prints a method"
            checked.add(url)
    job_pages = {url for url in checked if re.fullmatch(r"/jobs/\d+/", url)}
    # A succeeded and a failed job of each kind, the export whose folder went away under its zip job, and the two
    # imports of image collections (their own summary).
    assert len(job_pages) == 2 * len(Job.Kind.values) + 3
    assert len(checked) > 40
