"""The pair-authoring queue: candidates leased one at a time like videos, drafts, skip and undo, submitting makes a
pair with the candidate's domain, source and regions; review and export carry the regions into the sidecar."""

from __future__ import annotations

import json
import uuid

import pytest

from annotator.authoring.drafts import work_draft_save
from annotator.collections import authoring
from annotator.collections.services import collection_import
from annotator.drafting.services import drafting_settings_update
from annotator.export.services import ExportOptions, benchmark_export
from annotator.llm.endpoints import endpoint_create
from annotator.models import CandidateSkip, Job, Pair, PairCandidate, PairDraft, TeamSettings
from annotator.picking import services as picking
from annotator.similarity.services import current_fingerprint
from subtlebench.errors import Conflict, Invalid
from tests.collection_fixtures import levir_folder, mvtec_folder

pytestmark = pytest.mark.django_db


@pytest.fixture
def levir(tmp_path):
    collection_import(source=str(levir_folder(tmp_path / "levir")), name="levir_cd", domain="aerial", sync=True)
    return {c.source_id: c for c in PairCandidate.objects.all()}


def key() -> str:
    return uuid.uuid4().hex


def test_candidates_are_leased_one_at_a_time_oldest_first(levir, annotator, annotator2):
    first = authoring.candidate_lease_next(user=annotator)
    assert first.source_id == "train_1" and first.is_held_by(annotator)
    assert authoring.candidate_lease_next(user=annotator) == first  # the one held, again
    second = authoring.candidate_lease_next(user=annotator2)
    assert second.source_id == "train_2"
    with pytest.raises(Conflict, match="leased to another annotator"):
        authoring.candidate_heartbeat(candidate=second, user=annotator)


def test_submitting_makes_a_pair_with_the_candidates_fields_and_marks_it_authored(levir, annotator):
    candidate = authoring.candidate_lease_next(user=annotator)
    work_draft_save(authoring.CANDIDATES, item=candidate, user=annotator, state={"question": "half"}, version=0)

    pair, created = authoring.candidate_submit(
        user=annotator,
        candidate=candidate,
        category="existence",
        question="Which building appeared by the road?",
        answer="a building",
        distractors=["a road", "a tree"],
        client_key=key(),
    )

    assert created and pair.status == Pair.Status.SUBMITTED
    assert (pair.domain, pair.source, pair.source_id) == ("aerial", "levir_cd", "train_1")
    assert pair.group_key == "levir_cd:train_1"  # the scene's stem, in its collection
    assert (pair.image_1, pair.image_2) == (candidate.image_1, candidate.image_2)
    assert pair.regions == [{"image": 2, "x": 10, "y": 4, "w": 10, "h": 8}]
    candidate.refresh_from_db()
    assert (candidate.status, candidate.pair, candidate.lease_holder) == ("authored", pair, None)
    assert not PairDraft.objects.filter(candidate=candidate).exists()
    assert authoring.candidate_lease_next(user=annotator).source_id == "train_2"  # authored: out of the queue


def test_two_collections_sharing_a_class_name_share_no_split_group_and_no_cluster(tmp_path, annotator, reviewer):
    for name, shade in (("mvtec_a", 40), ("mvtec_b", 120)):  # other pictures: no image links the two
        collection_import(source=str(mvtec_folder(tmp_path / name, shade)), name=name, domain="industrial", sync=True)
    keys = set(PairCandidate.objects.values_list("collection__name", "group_key"))
    assert keys == {("mvtec_a", "mvtec_a:bottle"), ("mvtec_b", "mvtec_b:bottle")}
    while candidate := authoring.candidate_lease_next(user=annotator):
        pair, _ = authoring.candidate_submit(
            user=annotator,
            candidate=candidate,
            category="existence",
            question="Which crack appeared on the bottle?",
            answer="a long crack",
            distractors=["a chip", "a scratch"],
            client_key=key(),
        )
    Pair.objects.update(similarity=0.95, similarity_model=current_fingerprint())
    for pair in Pair.objects.order_by("pk"):
        picking.pair_review(pair=pair, reviewer=reviewer, decision="accept", version=pair.version)

    # Two groups and half to val: each split gets one collection's bottles (one group would land whole in one).
    result = benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0.5))
    assert (result["considered"], result["skipped_count"]) == (6, 0)
    lines = [json.loads(line) for line in (tmp_path / "out/metadata/items.jsonl").read_text().splitlines()]
    source_of = {f"existence_{p.source}_{p.source_id}": p.source for p in Pair.objects.all()}
    placed = {(source_of[line["item_id"]], line["group"], line["split"]) for line in lines}
    assert {(source, group) for source, group, _ in placed} == {
        ("mvtec_a", "mvtec_a:bottle"),
        ("mvtec_b", "mvtec_b:bottle"),
    }
    assert sorted(split for _, _, split in placed) == ["test", "val"]


def test_a_binary_answer_that_puts_image_2_first_trades_the_regions_too(levir, annotator, monkeypatch):
    monkeypatch.setattr("annotator.picking.editor.answer_position_next", lambda category: "first image")
    candidate = authoring.candidate_lease_next(user=annotator)
    pair, _ = authoring.candidate_submit(
        user=annotator,
        candidate=candidate,
        category="quantity",
        question="In which image are there more buildings?",
        answer_frame="b",  # image B (the candidate's image 2) holds the answer, and the answer goes first
        client_key=key(),
    )
    assert pair.swapped and pair.image_1 == candidate.image_2 and pair.answer == "first image"
    assert pair.regions == [{"image": 1, "x": 10, "y": 4, "w": 10, "h": 8}]


def test_the_same_client_key_makes_one_pair_and_a_bad_question_makes_none(levir, annotator):
    candidate = authoring.candidate_lease_next(user=annotator)
    with pytest.raises(Invalid):
        authoring.candidate_submit(
            user=annotator, candidate=candidate, category="existence", question="", answer="x", client_key=key()
        )
    assert not Pair.objects.exists()
    fields = {"category": "temporal", "question": "Which image was taken later?", "client_key": key()}
    pair, created = authoring.candidate_submit(user=annotator, candidate=candidate, **fields)
    again, created_again = authoring.candidate_submit(user=annotator, candidate=candidate, **fields)
    assert created and not created_again and again == pair and Pair.objects.count() == 1
    assert pair.answer == ("second image" if not pair.swapped else "first image")  # B is the later image


def test_a_skip_takes_it_out_of_the_queue_and_undo_brings_it_back(levir, annotator, annotator2):
    candidate = authoring.candidate_lease_next(user=annotator)
    skip = authoring.candidate_release(candidate=candidate, user=annotator, reason="no_difference")
    assert authoring.candidate_lease_next(user=annotator).source_id == "train_2"
    assert authoring.candidates_open_to(annotator2).filter(pk=candidate.pk).exists()  # only the skipper's
    authoring.candidate_release(candidate=PairCandidate.objects.get(source_id="train_2"), user=annotator)
    authoring.candidate_skip_undo(skip_id=skip.pk, user=annotator)
    assert not CandidateSkip.objects.exists()
    assert authoring.candidates_open_to(annotator).filter(pk=candidate.pk).exists()


def test_bad_images_take_it_out_of_everyones_queue(levir, annotator, annotator2):
    candidate = authoring.candidate_lease_next(user=annotator)
    authoring.candidate_release(candidate=candidate, user=annotator, reason="bad_images")
    assert not authoring.candidates_open_to(annotator2).filter(pk=candidate.pk).exists()


def test_reviewed_and_exported_the_pair_keeps_its_domain_and_its_regions_in_the_sidecar(tmp_path, annotator, reviewer):
    collection_import(source=str(mvtec_folder(tmp_path / "mvtec")), name="mvtec", domain="industrial", sync=True)
    candidate = PairCandidate.objects.get(source_id="bottle_broken_large_000")
    authoring.candidate_heartbeat(candidate=candidate, user=annotator)
    pair, _ = authoring.candidate_submit(
        user=annotator,
        candidate=candidate,
        category="attribute",
        question="What changed about the bottle's rim?",
        answer="it is chipped",
        distractors=["it is bent", "it is painted"],
        client_key=key(),
    )
    # As the similarity worker would score it (the import queued the images' embeddings).
    Pair.objects.filter(pk=pair.pk).update(similarity=0.93, similarity_model=current_fingerprint())
    pair.refresh_from_db()
    picking.pair_review(pair=pair, reviewer=reviewer, decision="accept", version=pair.version)

    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))

    records = [json.loads(line) for line in (tmp_path / "out/data/test.jsonl").read_text().splitlines()]
    assert [(r["domain"], r["source"], r["source_id"], r["category"]) for r in records] == [
        ("industrial", "mvtec", "bottle_broken_large_000", "attribute")
    ]
    assert "regions" not in records[0]  # the official record is unchanged
    sidecar = [json.loads(line) for line in (tmp_path / "out/metadata/items.jsonl").read_text().splitlines()]
    assert sidecar[0]["item_id"] == "attribute_mvtec_bottle_broken_large_000"
    assert sidecar[0]["regions"] == [{"image": 2, "x": 4, "y": 5, "w": 6, "h": 6}]
    assert sidecar[0]["origin"]["files"] == ["bottle/train/good/000.png", "bottle/test/broken_large/000.png"]


# --- The pair editor's regions on a candidate pair ---------------------------------------------------------------

EXISTENCE = {
    "category": "existence",
    "question": "Which building appeared by the road?",
    "answer": "a building",
    "distractors": ["a pool"],
}
REGION_REFUSED = (
    "An existence pair needs at least one difference region: draw a box on A or B where the images differ (drag on an "
    "image in draw mode, or press r)."
)


def test_the_boxes_drawn_on_a_candidate_are_stored_beside_its_masks(levir, annotator):
    candidate = authoring.candidate_lease_next(user=annotator)  # train_1: its label marks a box on image 2
    mask = {"frame": "b", "x": 10, "y": 4, "w": 10, "h": 8}
    drawn = {"frame": "a", "x": 1, "y": 2, "w": 3, "h": 4}
    pair, _ = authoring.candidate_submit(
        user=annotator, candidate=candidate, client_key=key(), regions=[mask, drawn], **EXISTENCE
    )
    assert pair.regions == [
        {"image": 2, "x": 10, "y": 4, "w": 10, "h": 8},
        {"image": 1, "x": 1, "y": 2, "w": 3, "h": 4},
    ]


def test_a_required_region_refuses_a_candidate_submit_without_a_box_and_stores_nothing(levir, annotator):
    TeamSettings.objects.create(pk=1, regions_required=["existence"])
    candidate = authoring.candidate_lease_next(user=annotator)
    # The annotator took the mask's box off: nothing is left to mark the difference.
    with pytest.raises(Invalid) as refused:
        authoring.candidate_submit(user=annotator, candidate=candidate, client_key=key(), regions=[], **EXISTENCE)
    assert refused.value.errors == {"regions": [REGION_REFUSED]}
    # train_2 has no label: left out, its own regions are none.
    authoring.candidate_release(candidate=candidate, user=annotator)
    PairCandidate.objects.filter(pk=candidate.pk).update(status=PairCandidate.Status.DISMISSED)
    unmarked = authoring.candidate_lease_next(user=annotator)
    assert unmarked.source_id == "train_2"
    with pytest.raises(Invalid, match="needs at least one difference region"):
        authoring.candidate_submit(user=annotator, candidate=unmarked, client_key=key(), **EXISTENCE)
    assert not Pair.objects.exists()
    unmarked.refresh_from_db()
    assert (unmarked.status, unmarked.lease_holder) == ("open", annotator)


def test_the_api_refuses_a_candidate_submit_without_a_box_in_a_category_that_requires_one(levir, client_for, annotator):
    TeamSettings.objects.create(pk=1, regions_required=["existence"])
    candidate = PairCandidate.objects.get(source_id="train_2")  # no label: no box of its own
    client = client_for(annotator)
    assert client.post(f"/api/candidates/{candidate.pk}/heartbeat/").status_code == 200
    url = f"/api/candidates/{candidate.pk}/submit/"
    refused = client.post(url, {**EXISTENCE, "client_key": key()}, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["errors"] == {"regions": [REGION_REFUSED]}
    assert not Pair.objects.exists()
    box = {"frame": "b", "x": 44, "y": 20, "w": 8, "h": 12}
    outside = client.post(url, {**EXISTENCE, "client_key": key(), "regions": [box]}, content_type="application/json")
    assert outside.status_code == 400
    assert outside.json()["errors"]["regions"] == ["region 1: the box (44, 20, 8×12) runs outside image 2 (48×32)."]
    box["w"] = 4
    made = client.post(url, {**EXISTENCE, "client_key": key(), "regions": [box]}, content_type="application/json")
    assert made.status_code == 201, made.json()
    assert made.json()["regions"] == [{"image": 2, "x": 44, "y": 20, "w": 4, "h": 12}]


def test_the_candidate_workbench_opens_the_editor_with_its_regions_the_rule_and_drafting(
    levir, client_for, annotator, coordinator, tmp_path
):
    TeamSettings.objects.create(pk=1, regions_required=["existence", "state"])
    endpoint = endpoint_create(user=coordinator, name="drafter", base_url="http://127.0.0.1:9/v1", model_id="m")
    drafting_settings_update(user=coordinator, drafting=[endpoint.pk], default=endpoint.pk, background=[])
    candidate = authoring.candidate_lease_next(user=annotator)
    page = client_for(annotator).get(f"/work/candidates/{candidate.pk}/")
    config = page.context["config"]
    assert config["start"]["regions"] == [{"frame": "b", "x": 10, "y": 4, "w": 10, "h": 8}]
    assert config["regions_required"] == ["existence", "state"]
    assert config["drafting"]["drafters"] == [{"id": endpoint.pk, "name": "drafter"}]
    assert config["urls"]["model_draft"] == f"/api/candidates/{candidate.pk}/model-draft/"
    assert (config["one_pair"], config["timed"], config["leave_reason"]) == (True, False, None)
    content = page.content.decode()
    assert 'id="draft-model"' in content and 'id="regions-required"' in content and 'id="suggestions"' not in content
    assert "region marked" not in content  # the regions are in the editor's bar, not counted in the header

    pair, _ = authoring.candidate_submit(user=annotator, candidate=candidate, client_key=key(), **EXISTENCE)
    (row,) = client_for(annotator).get(f"/work/candidates/{candidate.pk}/").context["config"]["pairs"]
    assert (row["id"], row["regions"], row["editable"]) == (pair.pk, config["start"]["regions"], True)


# --- Pages and API -------------------------------------------------------------------------------------------


def test_the_work_page_offers_candidates_beside_videos(levir, client_for, annotator):
    assert b'hx-get="/work/candidates/"' in client_for(annotator).get("/work/").content
    page = client_for(annotator).get("/work/candidates/")
    assert page.status_code == 200
    assert b"2 candidate pairs from image collections" in page.content and b'id="ask-for-candidate"' in page.content
    response = client_for(annotator).post("/work/candidates/next/")
    candidate = PairCandidate.objects.get(lease_holder=annotator)
    assert response.status_code == 302 and response["Location"] == f"/work/candidates/{candidate.pk}/"
    workbench = client_for(annotator).get(response["Location"])
    assert workbench.status_code == 200
    config = json.loads(workbench.context["config"] and json.dumps(workbench.context["config"]))
    assert [frame["name"] for frame in config["frames"]] == ["A/train_1.png", "B/train_1.png"]
    assert config["urls"]["submit"] == f"/api/candidates/{candidate.pk}/submit/" and config["held"] is True


def test_the_api_authors_a_candidate(levir, client_for, annotator):
    client = client_for(annotator)
    leased = client.post("/api/candidates/lease/").json()["candidate"]
    draft = client.put(
        f"/api/candidates/{leased['id']}/draft/", {"state": {"a": 0}, "version": 0}, content_type="application/json"
    )
    assert draft.status_code == 200
    body = {
        "category": "existence",
        "question": "Which building appeared by the road?",
        "answer": "a building",
        "distractors": ["a pool"],
        "client_key": key(),
        "draft_version": draft.json()["version"],
    }
    response = client.post(f"/api/candidates/{leased['id']}/submit/", body, content_type="application/json")
    assert response.status_code == 201, response.json()
    assert (response.json()["domain"], response.json()["source_id"]) == ("aerial", "train_1")


def test_pages_and_api_refuse_anonymous_wrong_role_and_wrong_method(levir, client, client_for, annotator, reviewer):
    candidate = PairCandidate.objects.get(source_id="train_1")
    assert client.get(f"/work/candidates/{candidate.pk}/").status_code == 302  # to the login page
    assert client.get("/collections/").status_code == 302
    assert client_for(reviewer).get(f"/work/candidates/{candidate.pk}/").status_code == 403
    assert client_for(annotator).get("/collections/").status_code == 403
    assert client_for(annotator).post("/api/collections/import/", {}).status_code == 403
    assert client_for(annotator).put("/work/candidates/next/").status_code == 405
    assert client_for(annotator).get("/api/candidates/lease/").status_code == 405


def test_the_collections_page_imports_through_a_job(tmp_path, client_for, coordinator):
    source = levir_folder(tmp_path / "levir2")
    client = client_for(coordinator)
    response = client.post(
        "/collections/import/", {"source": str(source), "name": "levir_two", "domain": "aerial", "layout": "auto"}
    )
    assert response.status_code == 302 and response["Location"].startswith("/jobs/")
    refused = client.post(
        "/collections/import/",
        {"source": str(tmp_path / "nowhere"), "name": "x", "domain": "aerial", "layout": "auto"},
        follow=True,
    )
    assert b"does not exist" in refused.content
    page = client.get("/collections/")
    assert page.status_code == 200 and b"Recent imports" in page.content


def test_a_returned_pair_is_fixed_from_its_candidate(levir, annotator, reviewer):
    candidate = authoring.candidate_lease_next(user=annotator)
    fields = {"category": "existence", "answer": "a building", "distractors": ["a pool"]}
    pair, _ = authoring.candidate_submit(
        user=annotator, candidate=candidate, question="Which thing appeared by the road?", client_key=key(), **fields
    )
    Pair.objects.filter(pk=pair.pk).update(similarity=0.9, similarity_model=current_fingerprint())
    picking.pair_review(pair=pair, reviewer=reviewer, decision="reject", version=pair.version, reason="Say where.")
    candidate.refresh_from_db()

    fixed, created = authoring.candidate_submit(
        user=annotator,
        candidate=candidate,
        question="Which building appeared by the road on the left?",
        client_key=key(),
        pair_id=pair.pk,
        version=pair.version,
        **fields,
    )

    assert not created and fixed.pk == pair.pk and fixed.version == pair.version + 1
    assert (fixed.status, fixed.question) == ("submitted", "Which building appeared by the road on the left?")
    assert fixed.regions == [{"image": 2, "x": 10, "y": 4, "w": 10, "h": 8}] and Pair.objects.count() == 1


def test_the_home_page_counts_the_pairs_to_author_and_ignores_candidate_drafts(levir, client_for, annotator):
    candidate = authoring.candidate_lease_next(user=annotator)
    work_draft_save(authoring.CANDIDATES, item=candidate, user=annotator, state={"question": "half"}, version=0)
    page = client_for(annotator).get("/")
    assert page.status_code == 200
    assert page.context["waiting"]["counts"]["pairs_to_author"] == 1  # the other one; alice holds the first
    assert page.context["waiting"]["draft"] is None  # a draft on a candidate is on the work page, not a video's
    assert b'id="count-pairs-to-author"' in page.content


def test_the_import_api_answers_the_same_job_for_the_same_idempotency_key(tmp_path, client_for, coordinator):
    source = levir_folder(tmp_path / "levir")
    client = client_for(coordinator)
    body = {"source": str(source), "name": "levir_cd", "domain": "aerial"}
    first = client.post("/api/collections/import/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1")
    again = client.post("/api/collections/import/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == again.status_code == 202
    assert first.json()["job_id"] == again.json()["job_id"]
    assert Job.objects.filter(kind="import").count() == 1


def test_the_overview_counts_the_candidate_pairs(levir, client_for, coordinator, annotator):
    authoring.candidate_lease_next(user=annotator)
    response = client_for(coordinator).get("/overview/")
    assert response.context["figures"]["candidates"] == {"open": 2, "held": 1, "authored": 0}
    assert b'id="pairs-to-author"' in response.content
