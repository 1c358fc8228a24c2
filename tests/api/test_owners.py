"""Owners checked on every write (issue 13): every write operation of the API schema, tried as a user who must not
do it (the wrong role, or another user's object), answers 403 or 404 (409 where someone else holds the lease) and
changes nothing in the database. A write operation the table does not cover fails the coverage test."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection
from drf_spectacular.generators import SchemaGenerator

from annotator.captions import services as captions
from annotator.collections import authoring
from annotator.models import CandidateSkip, CaptionSkip, Category, Collection, DoubleReview, Job, Pair, VideoSkip
from annotator.picking import services as picking
from evaluation.studies import participation
from evaluation.studies import services as studies
from subtlebench.tokens import api_token_create
from tests.conftest import built_once, make_user
from tests.factories import make_candidate, make_pair, make_video

pytestmark = pytest.mark.django_db

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
CAPTION = "The cup moved from the left edge of the table to its centre."


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory, tiny_dinov3_dir):
    """Objects that belong to someone: alice's lease, pair, caption task, caption and token; a study's items.

    Built once for the module's 230 tests (`built_once`): each test's writes are refused, and rolled back anyway.
    """
    with built_once(django_db_blocker, tmp_path_factory.mktemp("owners"), tiny_dinov3_dir):
        yield build_world()


def build_world() -> dict:
    annotator, annotator2 = make_user("alice", "annotator"), make_user("bob", "annotator")
    reviewer, coordinator = make_user("rita", "reviewer"), make_user("cora", "coordinator")
    held = make_video(frames=3)
    picking.video_heartbeat(video=held, user=annotator)
    alices_pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator, video=held)
    ritas_pair = make_pair(status=Pair.Status.SUBMITTED, author=reviewer)
    to_caption = [make_pair(author=coordinator) for _ in range(2)]
    captions.caption_batch_create(
        created_by=coordinator, title="t", selection="list", pair_ids=[p.pk for p in to_caption]
    )
    first = captions.caption_task_lease(user=annotator)
    caption = captions.caption_submit(task_id=first.pk, user=annotator, text=CAPTION)
    task = captions.caption_task_lease(user=annotator)  # alice holds this one now
    for _ in range(4):
        make_pair(category=Category.TEMPORAL)
    study = studies.study_create(name="Owners", fraction=1.0, practice_count=0)
    participants = [studies.participant_create(study=study) for _ in range(2)]
    for participant in participants:
        participant.consent()
    assignment = participation.participant_next_item(participant=participants[0])
    token, _ = api_token_create(user=annotator, name="alice's")
    # Bob's pair in the double-review sample, decided once by rita: its second review is nobody's yet but hers.
    bobs_pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator2)
    double_review = DoubleReview.objects.create(pair=bobs_pair, pair_version=bobs_pair.version, rate=1.0)
    picking.pair_review(pair=bobs_pair, reviewer=reviewer, decision="accept", version=bobs_pair.version)
    skip = VideoSkip.objects.create(video=make_video(frames=2), user=annotator, reason=VideoSkip.Reason.NO_PAIR)
    caption_skip = CaptionSkip.objects.create(task=first, user=annotator, reason="No visible difference")
    decided_pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator2)
    picking.pair_review(pair=decided_pair, reviewer=reviewer, decision="accept", version=decided_pair.version)
    queued = Job.objects.create(kind=Job.Kind.EXPORT, title="queued", created_by=coordinator)
    failed = Job.objects.create(kind=Job.Kind.EXPORT, title="failed", created_by=coordinator, status=Job.Status.FAILED)
    from annotator.llm.endpoints import endpoint_create

    endpoint = endpoint_create(user=coordinator, name="owners", base_url="http://127.0.0.1:9/v1", model_id="m")
    from tests.model_fixtures import make_run

    run = make_run(endpoint)
    # Image collections (issue 27): alice holds a candidate pair, and skipped another.
    candidate = make_candidate()
    authoring.candidate_heartbeat(candidate=candidate, user=annotator)
    candidate_skip = CandidateSkip.objects.create(candidate=make_candidate(), user=annotator, reason="no_difference")
    # A bulk action of the data manager, done: only a coordinator may undo it.
    from annotator.datamanager.bulk import bulk_run_unit, bulk_start

    bulk_job = bulk_start(table="pairs", action="exclude", by=coordinator, ids=[ritas_pair.pk])
    bulk_run_unit(job_id=bulk_job.pk, ids=[ritas_pair.pk])

    # A conversation on alice's pair: rita asks; bob is no part of it.
    from annotator.conversations.services import comment_post

    comment = comment_post(item=alices_pair, author=reviewer, body="Which cup moved?")
    collection = Collection.objects.create(name="owners", domain="aerial", layout="images", location="/x")
    return {
        "collection": collection,
        "bulk_job": bulk_job,
        "comment": comment,
        "candidate": candidate,
        "candidate_skip": candidate_skip,
        "endpoint": endpoint,
        "run": run,
        "queued_job": queued,
        "failed_job": failed,
        "video": held,
        "pair": alices_pair,
        "ritas_pair": ritas_pair,
        "decided_pair": decided_pair,
        "skip": skip,
        "caption_skip": caption_skip,
        "task": task,
        "caption": caption,
        "study": study,
        "participants": participants,
        "assignment": assignment,
        "token": token,
        "double_review": double_review,
        "users": {"alice": annotator, "bob": annotator2, "rita": reviewer, "cora": coordinator},
    }


def pair_submit_body(w) -> dict:
    return {
        "video": w["video"].pk,
        "index_a": 0,
        "index_b": 1,
        "category": "temporal",
        "question": "Which image was taken later?",
        "answer_frame": "b",
        "client_key": "bob-takes-over-1",
        "pair": w["pair"].pk,
        "version": w["pair"].version,
    }


def candidate_submit_body(w) -> dict:
    return {"category": "temporal", "question": "Which image was taken later?", "client_key": "bob-takes-candidate"}


DRAFT_QUESTION = {"category": "temporal", "index_a": 0, "index_b": 1, "question": "Which image was taken later?"}


# (method, schema path): [(who, url, body, expected status), ...]; who is a user of the world, or "anonymous".
# `who` never may do it: the wrong role, another user's object, or another participant's item.
CASES = {
    # Rename, archive, take out of the archive, delete: coordinators only (a reviewer, an annotator are refused).
    **{
        ("POST", f"/api/{prefix}/{{{key}}}/{action}/"): [
            ("rita", f"/api/{prefix}/{{{obj}}}/{action}/", {"name": "theirs"} if action == "rename" else None, 403),
            ("alice", f"/api/{prefix}/{{{obj}}}/{action}/", {"name": "theirs"} if action == "rename" else None, 403),
        ]
        for prefix, key, obj in (
            ("videos", "video_id", "video"),
            ("collections", "collection_id", "collection"),
            ("models", "endpoint_id", "endpoint"),
            ("studies", "id", "study"),
        )
        for action in ("rename", "archive", "unarchive", "delete")
    },
    # Model edits: a coordinator starts a job; reviewers and coordinators check an edit (an annotator may not).
    ("POST", "/api/edit-jobs/"): [("rita", "/api/edit-jobs/", {"collection": 1, "kind": "colour"}, 403)],
    ("POST", "/api/edits/{edit_id}/accept/"): [("alice", "/api/edits/{edit}/accept/", None, 403)],
    ("POST", "/api/edits/{edit_id}/refuse/"): [("alice", "/api/edits/{edit}/refuse/", {"reason": "other"}, 403)],
    ("POST", "/api/pairs/{pair_id}/comments/"): [("bob", "/api/pairs/{pair}/comments/", {"body": "Mine now."}, 403)],
    ("POST", "/api/pairs/{pair_id}/fixed/"): [("bob", "/api/pairs/{pair}/fixed/", None, 403)],
    ("POST", "/api/captions/{caption_id}/comments/"): [
        ("bob", "/api/captions/{caption}/comments/", {"body": "Mine now."}, 403)
    ],
    ("POST", "/api/captions/{caption_id}/fixed/"): [("bob", "/api/captions/{caption}/fixed/", None, 403)],
    ("POST", "/api/comments/{comment_id}/resolve/"): [
        ("bob", "/api/comments/{comment}/resolve/", {"resolved": True}, 403)
    ],
    ("POST", "/api/captions/{caption_id}/choose/"): [("alice", "/api/captions/{caption}/choose/", None, 403)],
    ("POST", "/api/captions/{caption_id}/review/"): [
        ("alice", "/api/captions/{caption}/review/", {"decision": "accept"}, 403)
    ],
    ("POST", "/api/captions/{caption_id}/reopen/"): [
        ("alice", "/api/captions/{caption}/reopen/", {"reason": "mine"}, 403)
    ],
    ("POST", "/api/captions/skips/{skip_id}/undo/"): [
        ("bob", "/api/captions/skips/{caption_skip}/undo/", None, 403),  # alice's skip
        ("rita", "/api/captions/skips/{caption_skip}/undo/", None, 403),
    ],
    ("POST", "/api/captions/batches/create/"): [("rita", "/api/captions/batches/create/", {"selection": "all"}, 403)],
    ("PUT", "/api/captions/tasks/{task_id}/draft/"): [
        ("rita", "/api/captions/tasks/{task}/draft/", {"text": "mine now"}, 403),
        ("bob", "/api/captions/tasks/{task}/draft/", {"text": "mine now"}, 409),  # alice holds its lease
    ],
    ("POST", "/api/captions/tasks/{task_id}/skip/"): [
        ("rita", "/api/captions/tasks/{task}/skip/", {"reason": "no"}, 403),
        ("bob", "/api/captions/tasks/{task}/skip/", {"reason": "no"}, 409),
    ],
    ("POST", "/api/captions/tasks/{task_id}/release/"): [
        ("rita", "/api/captions/tasks/{task}/release/", None, 403),
        ("bob", "/api/captions/tasks/{task}/release/", None, 409),  # alice holds its lease
    ],
    ("POST", "/api/captions/tasks/{task_id}/submit/"): [
        ("rita", "/api/captions/tasks/{task}/submit/", {"text": CAPTION}, 403),
        ("bob", "/api/captions/tasks/{task}/submit/", {"text": CAPTION}, 409),
    ],
    ("POST", "/api/captions/tasks/lease/"): [("rita", "/api/captions/tasks/lease/", None, 403)],
    ("POST", "/api/jobs/{job_id}/cancel/"): [
        ("alice", "/api/jobs/{queued_job}/cancel/", None, 403),
        ("rita", "/api/jobs/{queued_job}/cancel/", None, 403),
    ],
    ("POST", "/api/jobs/{job_id}/retry/"): [
        ("alice", "/api/jobs/{failed_job}/retry/", None, 403),
        ("rita", "/api/jobs/{failed_job}/retry/", None, 403),
    ],
    ("POST", "/api/exports/start/"): [("alice", "/api/exports/start/", {"target": "stolen"}, 403)],
    ("POST", "/api/releases/{release_name}/publications/mark/"): [
        ("alice", "/api/releases/v1/publications/mark/", {"when": "2020-01-01T00:00:00Z"}, 403)
    ],
    ("POST", "/api/models/create/"): [
        ("rita", "/api/models/create/", {"name": "m", "base_url": "http://gpu/v1", "model_id": "m"}, 403)
    ],
    ("POST", "/api/models/{endpoint_id}/profile/"): [
        ("alice", "/api/models/{endpoint}/profile/", {"request_preset": "openai_reasoning"}, 403),
        ("rita", "/api/models/{endpoint}/profile/", {"request_preset": "openai_reasoning"}, 403),
    ],
    ("POST", "/api/models/runs/{run_id}/label/"): [
        ("alice", "/api/models/runs/{run}/label/", {"label": "mine"}, 403),
        ("rita", "/api/models/runs/{run}/label/", {"label": "mine"}, 403),
    ],
    ("POST", "/api/models/runs/create/"): [
        ("alice", "/api/models/runs/create/", lambda w: {"endpoint": w["endpoint"].pk, "source": "release"}, 403),
        ("rita", "/api/models/runs/create/", lambda w: {"endpoint": w["endpoint"].pk, "source": "release"}, 403),
    ],
    ("POST", "/api/p/{token}/item/{item_token}/answer/"): [
        ("anonymous", "/api/p/{other_participant}/item/{item}/answer/", {"option": 1}, 404)
    ],
    ("POST", "/api/pairs/{pair_id}/review/"): [
        ("alice", "/api/pairs/{pair}/review/", {"decision": "accept", "version": 1}, 403),
        ("rita", "/api/pairs/{ritas_pair}/review/", {"decision": "accept", "version": 1}, 403),  # her own pair
    ],
    ("POST", "/api/pairs/{pair_id}/reopen/"): [
        ("alice", "/api/pairs/{decided_pair}/reopen/", {"reason": "I disagree"}, 403),
        ("bob", "/api/pairs/{decided_pair}/reopen/", {"reason": "my own pair"}, 403),
    ],
    ("POST", "/api/pairs/{pair_id}/withdraw/"): [
        ("bob", "/api/pairs/{pair}/withdraw/", None, 403),  # alice's pair
        ("rita", "/api/pairs/{pair}/withdraw/", None, 403),
    ],
    ("POST", "/api/skips/{skip_id}/undo/"): [
        ("bob", "/api/skips/{skip}/undo/", None, 403),  # alice's skip
        ("rita", "/api/skips/{skip}/undo/", None, 403),
    ],
    ("POST", "/api/pairs/{pair_id}/similarity-override/"): [
        ("rita", "/api/pairs/{pair}/similarity-override/", {"reason": "looks subtle"}, 403)
    ],
    ("POST", "/api/pairs/submit/"): [("bob", "/api/pairs/submit/", pair_submit_body, 403)],  # alice's pair
    ("POST", "/api/pairs/bulk/"): [
        ("alice", "/api/pairs/bulk/", {"filter": {}, "action": "accept"}, 403),
        ("rita", "/api/pairs/bulk/", {"filter": {}, "action": "accept"}, 403),  # reviewers read the tables
    ],
    ("POST", "/api/pairs/bulk/preview/"): [
        ("alice", "/api/pairs/bulk/preview/", {"filter": {}, "action": "accept"}, 403),
        ("rita", "/api/pairs/bulk/preview/", {"filter": {}, "action": "accept"}, 403),
    ],
    ("POST", "/api/videos/bulk/preview/"): [
        ("rita", "/api/videos/bulk/preview/", {"filter": {}, "action": "release"}, 403),
    ],
    ("POST", "/api/bulk/{job_id}/undo/"): [
        ("alice", "/api/bulk/{bulk_job}/undo/", None, 403),
        ("rita", "/api/bulk/{bulk_job}/undo/", None, 403),
    ],
    ("POST", "/api/videos/bulk/"): [
        ("alice", "/api/videos/bulk/", {"filter": {}, "action": "assign", "target": "alice"}, 403),
        ("rita", "/api/videos/bulk/", {"filter": {}, "action": "release"}, 403),
    ],
    ("POST", "/api/studies/{id}/invites/create/"): [
        ("alice", "/api/studies/{study}/invites/create/", {"count": 1}, 403)
    ],
    ("POST", "/api/studies/create/"): [("rita", "/api/studies/create/", {"name": "mine"}, 403)],
    ("POST", "/api/token/"): [("anonymous", "/api/token/", {"username": "alice", "password": "guess"}, 400)],
    ("POST", "/api/tokens/{token_id}/revoke/"): [("bob", "/api/tokens/{token}/revoke/", None, 404)],
    ("POST", "/api/second-reviews/{double_review_id}/"): [
        ("alice", "/api/second-reviews/{double_review}/", {"decision": "accept"}, 403),
        ("rita", "/api/second-reviews/{double_review}/", {"decision": "accept"}, 403),
    ],
    ("POST", "/api/videos/{video_id}/assign/"): [("alice", "/api/videos/{video}/assign/", {"username": "alice"}, 403)],
    ("PUT", "/api/videos/{video_id}/draft/"): [("rita", "/api/videos/{video}/draft/", {"state": {"q": "x"}}, 403)],
    ("POST", "/api/videos/{video_id}/model-draft/"): [
        ("rita", "/api/videos/{video}/model-draft/", {"category": "temporal", "index_a": 0, "index_b": 1}, 403),
        ("bob", "/api/videos/{video}/model-draft/", {"category": "temporal", "index_a": 0, "index_b": 1}, 409),
    ],
    ("POST", "/api/videos/{video_id}/model-draft/answers/"): [
        ("rita", "/api/videos/{video}/model-draft/answers/", DRAFT_QUESTION, 403),
        ("bob", "/api/videos/{video}/model-draft/answers/", DRAFT_QUESTION, 409),  # alice holds the video
    ],
    ("POST", "/api/videos/{video_id}/heartbeat/"): [
        ("rita", "/api/videos/{video}/heartbeat/", None, 403),
        ("bob", "/api/videos/{video}/heartbeat/", None, 409),  # alice holds it
    ],
    ("POST", "/api/videos/{video_id}/release/"): [
        ("bob", "/api/videos/{video}/release/", {"reason": "inappropriate"}, 403),
        ("rita", "/api/videos/{video}/release/", {"reason": "inappropriate"}, 403),
    ],
    ("POST", "/api/videos/import/"): [("alice", "/api/videos/import/", {"path": "."}, 403)],
    ("POST", "/api/work/lease/"): [("rita", "/api/work/lease/", None, 403)],
    # Image collections and the pair-authoring queue (issue 27)
    ("POST", "/api/collections/import/"): [
        ("alice", "/api/collections/import/", {"source": ".", "name": "x", "domain": "aerial"}, 403),
        ("rita", "/api/collections/import/", {"source": ".", "name": "x", "domain": "aerial"}, 403),
    ],
    ("POST", "/api/candidates/lease/"): [("rita", "/api/candidates/lease/", None, 403)],
    ("POST", "/api/candidates/{candidate_id}/heartbeat/"): [
        ("rita", "/api/candidates/{candidate}/heartbeat/", None, 403),
        ("bob", "/api/candidates/{candidate}/heartbeat/", None, 409),  # alice holds it
    ],
    ("POST", "/api/candidates/{candidate_id}/release/"): [
        ("bob", "/api/candidates/{candidate}/release/", {"reason": "bad_images"}, 403),
        ("rita", "/api/candidates/{candidate}/release/", {"reason": "bad_images"}, 403),
    ],
    ("PUT", "/api/candidates/{candidate_id}/draft/"): [
        ("rita", "/api/candidates/{candidate}/draft/", {"state": {"q": "x"}}, 403)
    ],
    ("POST", "/api/candidates/{candidate_id}/submit/"): [
        ("rita", "/api/candidates/{candidate}/submit/", candidate_submit_body, 403),
        ("bob", "/api/candidates/{candidate}/submit/", candidate_submit_body, 409),  # alice holds it
    ],
    ("POST", "/api/candidates/{candidate_id}/model-draft/"): [
        ("rita", "/api/candidates/{candidate}/model-draft/", {"category": "temporal", "index_a": 0, "index_b": 1}, 403),
        ("bob", "/api/candidates/{candidate}/model-draft/", {"category": "temporal", "index_a": 0, "index_b": 1}, 409),
    ],
    ("POST", "/api/candidates/{candidate_id}/model-draft/answers/"): [
        ("rita", "/api/candidates/{candidate}/model-draft/answers/", DRAFT_QUESTION, 403),
        ("bob", "/api/candidates/{candidate}/model-draft/answers/", DRAFT_QUESTION, 409),  # alice holds it
    ],
    ("POST", "/api/candidate-skips/{skip_id}/undo/"): [
        ("bob", "/api/candidate-skips/{candidate_skip}/undo/", None, 403),  # alice's skip
        ("rita", "/api/candidate-skips/{candidate_skip}/undo/", None, 403),
    ],
}
ROWS = [(operation, *row) for operation, rows in CASES.items() for row in rows]


def write_operations() -> set[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method.upper() in WRITE_METHODS
    }


def database_state() -> dict:
    """Every row of the project's own apps, to show that a refused write changed nothing: each table's rows as JSON,
    in primary key order, all tables in one query."""
    models = [
        model
        for label in ("annotator", "evaluation", "subtlebench")
        for model in apps.get_app_config(label).get_models()
    ]
    quote = connection.ops.quote_name
    tables = ", ".join(
        f"(SELECT json_agg(r ORDER BY r.{quote(model._meta.pk.column)}) FROM {quote(model._meta.db_table)} r)"
        for model in models
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {tables}")
        rows = cursor.fetchone()
    return {model._meta.label: table_rows or [] for model, table_rows in zip(models, rows, strict=True)}


def url_of(template: str, w) -> str:
    return template.format(
        bulk_job=w["bulk_job"].pk,
        caption=w["caption"].pk,
        task=w["task"].pk,
        pair=w["pair"].pk,
        ritas_pair=w["ritas_pair"].pk,
        decided_pair=w["decided_pair"].pk,
        skip=w["skip"].pk,
        caption_skip=w["caption_skip"].pk,
        study=w["study"].pk,
        token=w["token"].pk,
        video=w["video"].pk,
        item=w["assignment"].token,
        other_participant=w["participants"][1].token,
        queued_job=w["queued_job"].pk,
        failed_job=w["failed_job"].pk,
        double_review=w["double_review"].pk,
        candidate=w["candidate"].pk,
        comment=w["comment"].pk,
        candidate_skip=w["candidate_skip"].pk,
        endpoint=w["endpoint"].pk,
        run=w["run"].pk,
        collection=w["collection"].pk,
        edit=999_999,  # refused for the role before the edit is looked up
    )


def test_the_table_covers_every_write_operation_of_the_schema():
    covered = set(CASES)
    missing = sorted(write_operations() - covered)
    assert not missing, f"write operations without an owner test: add them to CASES: {missing}"
    assert not covered - write_operations(), (
        f"CASES names operations the schema no longer has: {covered - write_operations()}"
    )


@pytest.mark.parametrize(
    ("operation", "who", "template", "body", "expected"), ROWS, ids=[f"{r[0][0]} {r[2]} as {r[1]}" for r in ROWS]
)
def test_a_write_by_someone_who_may_not_is_refused_and_changes_nothing(
    client, world, operation, who, template, body, expected
):
    if who != "anonymous":
        client.force_login(world["users"][who])
    before = database_state()
    method = operation[0].lower()
    payload = body(world) if callable(body) else body
    response = getattr(client, method)(url_of(template, world), payload or {}, content_type="application/json")
    assert response.status_code == expected, response.content[:300]
    assert set(response.json()) == {"detail", "errors"}
    assert database_state() == before


# Their key is the password or the participant's token, not a login: the table above tries them with wrong keys.
PUBLIC = {("POST", "/api/token/"), ("POST", "/api/p/{token}/item/{item_token}/answer/")}
LOGGED_IN = sorted(set(CASES) - PUBLIC)


@pytest.mark.parametrize("operation", LOGGED_IN, ids=[f"{m} {p}" for m, p in LOGGED_IN])
def test_a_write_without_a_login_is_refused(client, world, operation):
    method, path = operation
    template = CASES[operation][0][1]
    before = database_state()
    response = getattr(client, method.lower())(url_of(template, world), {}, content_type="application/json")
    assert response.status_code in (401, 403)
    assert database_state() == before


def test_the_right_owner_passes_where_the_wrong_one_was_refused(client, world):
    """The refusals above are about who asks: the holder and a coordinator get through."""
    client.force_login(world["users"]["alice"])
    assert client.post(url_of("/api/videos/{video}/heartbeat/", world)).status_code == 200
    assert client.post(url_of("/api/tokens/{token}/revoke/", world)).status_code == 200
    draft = client.put(
        url_of("/api/captions/tasks/{task}/draft/", world), {"text": "x"}, content_type="application/json"
    )
    assert draft.status_code == 200
    assert client.post(url_of("/api/pairs/{pair}/withdraw/", world)).status_code == 200
    assert client.post(url_of("/api/skips/{skip}/undo/", world)).status_code == 200
    assert client.post(url_of("/api/captions/skips/{caption_skip}/undo/", world)).status_code == 200
    client.force_login(world["users"]["rita"])
    reopened = client.post(url_of("/api/pairs/{decided_pair}/reopen/", world), {"reason": "a second look"})
    assert reopened.status_code == 200
    client.force_login(world["users"]["cora"])
    released = client.post(url_of("/api/videos/{video}/release/", world), {"reason": "bad_video"})
    assert released.status_code == 200
    client.logout()
    participant = world["participants"][0]
    answer = client.post(
        f"/api/p/{participant.token}/item/{world['assignment'].token}/answer/",
        {"option": 1},
        content_type="application/json",
    )
    assert answer.status_code == 200 and answer.json()["recorded"] is True
