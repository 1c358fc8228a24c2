"""Rename, archive and delete of videos, collections, model endpoints, sweeps and studies (subtlebench/lifecycle.py):
the confirmation pages, the refusal that names what depends on an object, archive keeping new work away, the API."""

from __future__ import annotations

import pytest

from annotator.collections import authoring
from annotator.llm.endpoints import endpoint_create
from annotator.models import Collection, Frame, Image, ModelEndpoint, Pair, PairCandidate, Sweep, SweepItem, Video
from annotator.picking import services as picking
from annotator.synthetic.services import sweep_publish
from evaluation.models import Study
from evaluation.studies import participation
from evaluation.studies import services as studies
from subtlebench.errors import Conflict, Forbidden, Invalid
from tests.conftest import make_user
from tests.factories import make_candidate, make_pair, make_video

pytestmark = pytest.mark.django_db


def make_endpoint(name="gpt-x"):
    return endpoint_create(
        user=make_user(f"maker-{name}", "coordinator"), name=name, base_url="http://127.0.0.1:9/v1", model_id="m"
    )


def make_study(name="Pilot"):
    make_pair()
    make_pair()
    return studies.study_create(name=name, fraction=1.0, practice_count=0, open_cap=5)


# --- The confirmation pages: each kind, each action ---------------------------------------------------------------


def test_it_renames_archives_and_takes_back_a_video_on_its_pages(client_for, coordinator):
    video = make_video(frames=2, yt8m_id="vid-a")
    client = client_for(coordinator)
    assert "Rename video" in client.get(f"/videos/{video.pk}/rename/").content.decode()
    response = client.post(f"/videos/{video.pk}/rename/", {"name": "Kitchen, morning"})
    assert response.status_code == 302 and response["Location"] == f"/videos/{video.pk}/"
    video.refresh_from_db()
    assert video.title == "Kitchen, morning"
    assert "leased and assigned to nobody" in client.get(f"/videos/{video.pk}/archive/").content.decode()
    client.post(f"/videos/{video.pk}/archive/")
    video.refresh_from_db()
    assert video.archived_at is not None
    page = client.get(f"/videos/{video.pk}/").content.decode()
    assert "Take out of the archive" in page  # the undo, on the video's own page
    client.post(f"/videos/{video.pk}/unarchive/")
    video.refresh_from_db()
    assert video.archived_at is None


def test_it_refuses_a_rename_the_model_refuses(client_for, coordinator):
    video = make_video(frames=2)
    response = client_for(coordinator).post(f"/videos/{video.pk}/rename/", {"name": "two\nlines"})
    assert response.status_code == 400 and "error" in response.content.decode()
    video.refresh_from_db()
    assert "\n" not in video.title


def test_it_deletes_a_video_nothing_depends_on_with_its_frames(client_for, coordinator):
    video = make_video(frames=3)
    images = list(Image.objects.filter(frame__video=video).values_list("pk", flat=True))
    client = client_for(coordinator)
    assert "Nothing else depends on it" in client.get(f"/videos/{video.pk}/delete/").content.decode()
    response = client.post(f"/videos/{video.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/videos/"
    assert not Video.objects.filter(pk=video.pk).exists()
    assert not Frame.objects.filter(image_id__in=images).exists() and not Image.objects.filter(pk__in=images).exists()


def test_it_refuses_to_delete_a_video_with_pairs_and_names_them(client_for, coordinator):
    video = make_video(frames=3)
    pair = make_pair(video=video)
    client = client_for(coordinator)
    page = client.get(f"/videos/{video.pk}/delete/").content.decode()
    assert "Cannot delete it, because" in page and "1 pair" in page and f"{pair}" in page
    response = client.post(f"/videos/{video.pk}/delete/")
    assert response.status_code == 409
    assert "Cannot delete video" in response.content.decode() and "1 pair" in response.content.decode()
    assert Video.objects.filter(pk=video.pk).exists() and Pair.objects.filter(pk=pair.pk).exists()


def test_a_collection_is_deleted_with_its_images_and_candidates_when_no_pair_uses_them(client_for, coordinator):
    candidate = make_candidate(source="levir_cd")
    collection = candidate.collection
    response = client_for(coordinator).post(f"/collections/{collection.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/collections/"
    assert not Collection.objects.filter(pk=collection.pk).exists()
    assert not PairCandidate.objects.exists() and not Image.objects.filter(source="levir_cd").exists()


def test_a_collection_whose_images_make_a_pair_is_neither_deleted_nor_renamed(client_for, coordinator):
    candidate = make_candidate(source="levir_cd")
    collection = candidate.collection
    pair = make_pair(source="levir_cd")
    Pair.objects.filter(pk=pair.pk).update(image_1=candidate.image_1, image_2=candidate.image_2, video=None)
    client = client_for(coordinator)
    refused = client.post(f"/collections/{collection.pk}/delete/").content.decode()
    assert "Cannot delete collection levir_cd, because 1 pair" in refused and str(pair) in refused
    renamed = client.post(f"/collections/{collection.pk}/rename/", {"name": "levir"})
    assert renamed.status_code == 409 and "1 pair export under its name" in renamed.content.decode()
    collection.refresh_from_db()
    assert collection.name == "levir_cd"


def test_a_collection_renamed_carries_its_name_to_its_images_and_candidates(client_for, coordinator):
    candidate = make_candidate(source="levir_cd", source_id="scene_1")
    client_for(coordinator).post(f"/collections/{candidate.collection_id}/rename/", {"name": "levir"})
    candidate.refresh_from_db()
    assert candidate.collection.name == "levir" and candidate.source == "levir"
    assert candidate.group_key == "levir:scene_1"
    assert set(Image.objects.filter(collection=candidate.collection).values_list("source", flat=True)) == {"levir"}
    refused = client_for(coordinator).post(f"/collections/{candidate.collection_id}/rename/", {"name": "not a slug"})
    assert refused.status_code == 400


def test_a_model_endpoint_with_runs_is_kept_and_one_without_is_deleted(client_for, coordinator):
    from evaluation.runs.services import evaluation_start
    from tests.modeleval_release_factories import make_release

    used, unused = make_endpoint("used"), make_endpoint("unused")
    evaluation_start(endpoint=used, user=coordinator, release=make_release([(make_pair(), "test", False)]), send=False)
    client = client_for(coordinator)
    refused = client.post(f"/models/endpoints/{used.pk}/delete/")
    assert refused.status_code == 409 and "1 model evaluation" in refused.content.decode()
    assert client.post(f"/models/endpoints/{unused.pk}/delete/")["Location"] == "/models/"
    assert list(ModelEndpoint.objects.values_list("name", flat=True)) == ["used"]
    client.post(f"/models/endpoints/{used.pk}/rename/", {"name": "used-v2"})
    assert ModelEndpoint.objects.get().name == "used-v2"
    make_endpoint("taken")
    clash = client.post(f"/models/endpoints/{used.pk}/rename/", {"name": "taken"})
    assert clash.status_code == 400 and "taken" in clash.content.decode()


def test_a_sweep_with_generated_pairs_is_kept_and_an_empty_one_deleted(client_for, coordinator):
    empty = Sweep.objects.create(title="Empty", family="quantity", items_per_cell=1)
    made = Sweep.objects.create(title="Made", family="quantity", items_per_cell=1)
    SweepItem.objects.create(sweep=made, cell=0, index=0, pair=make_pair(domain="synthetic"))
    client = client_for(coordinator)
    refused = client.post(f"/synthetic/{made.pk}/delete/")
    assert refused.status_code == 409 and "1 sweep item" in refused.content.decode()
    assert client.post(f"/synthetic/{empty.pk}/delete/").status_code == 302
    client.post(f"/synthetic/{made.pk}/rename/", {"name": "Counting dots"})
    assert list(Sweep.objects.values_list("title", flat=True)) == ["Counting dots"]


def test_a_study_with_participants_is_kept_and_one_without_is_deleted(client_for, coordinator):
    taken, fresh = make_study("Taken"), make_study("Fresh")
    studies.participant_create(study=taken)
    client = client_for(coordinator)
    refused = client.post(f"/studies/{taken.pk}/delete/")
    assert refused.status_code == 409 and "1 participant" in refused.content.decode()
    assert client.post(f"/studies/{fresh.pk}/delete/")["Location"] == "/studies/"
    client.post(f"/studies/{taken.pk}/rename/", {"name": "Taken, round 2"})
    assert list(Study.objects.values_list("name", flat=True)) == ["Taken, round 2"]


def test_the_actions_are_for_coordinators_only(client, client_for, annotator, reviewer):
    video = make_video(frames=2)
    assert client.get(f"/videos/{video.pk}/delete/").status_code == 302  # to the login page
    for user in (annotator, reviewer):
        assert client_for(user).post(f"/videos/{video.pk}/delete/").status_code == 403
    assert Video.objects.filter(pk=video.pk).exists()


def test_the_actions_refuse_other_methods_and_unknown_actions(client_for, coordinator):
    video = make_video(frames=2)
    client = client_for(coordinator)
    assert client.put(f"/videos/{video.pk}/delete/").status_code == 405
    assert client.post(f"/videos/{video.pk}/explode/").status_code == 404
    assert client.get("/videos/999999/rename/").status_code == 404


# --- Archived: kept for what uses it, never offered for new work --------------------------------------------------


def test_an_archived_video_is_never_leased_nor_offered_for_assignment(annotator):
    video = make_video(frames=2)
    Video.objects.filter(pk=video.pk).update(archived_at="2026-01-01T00:00Z")
    assert picking.video_lease_next(user=annotator) is None
    assert video not in list(picking.assignable_videos())
    Video.objects.filter(pk=video.pk).update(archived_at=None)
    assert picking.video_lease_next(user=annotator) == video


def test_an_archived_collections_candidates_are_offered_to_nobody(annotator):
    candidate = make_candidate()
    Collection.objects.filter(pk=candidate.collection_id).update(archived_at="2026-01-01T00:00Z")
    assert authoring.candidate_lease_next(user=annotator) is None
    assert authoring.candidates_open_to(annotator).count() == 0
    from annotator.mining.services import mining_options

    with pytest.raises(Invalid, match="archived"):
        mining_options(scope=str(candidate.collection_id))


def test_an_archived_endpoint_starts_no_run_and_drafts_nothing(coordinator):
    from annotator.picking.drafted import drafters
    from evaluation.runs.services import evaluation_start
    from evaluation.runs.views import RunForm
    from tests.modeleval_release_factories import make_release

    endpoint = make_endpoint()
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(archived_at="2026-01-01T00:00Z", drafts_questions=True)
    endpoint.refresh_from_db()
    assert endpoint not in RunForm().fields["endpoint"].queryset
    assert endpoint not in drafters()
    with pytest.raises(Invalid, match="archived"):
        evaluation_start(endpoint=endpoint, user=coordinator, release=make_release([(make_pair(), "test", False)]))


def test_an_archived_study_admits_nobody_new(coordinator):
    study = make_study()
    invited = studies.participant_create(study=study)
    Study.objects.filter(pk=study.pk).update(archived_at="2026-01-01T00:00Z")
    study.refresh_from_db()
    with pytest.raises(Forbidden, match="closed"):
        participation.open_link_arrival_check(study=study)
    with pytest.raises(Forbidden, match="closed"):
        participation.participant_consent(participant=invited, params={})
    with pytest.raises(Invalid, match="archived"):
        studies.study_invite(study=study, count=1)


def test_an_archived_sweep_is_not_published(coordinator):
    sweep = Sweep.objects.create(title="S", family="quantity", items_per_cell=1, archived_at="2026-01-01T00:00Z")
    with pytest.raises(Conflict, match="archived"):
        sweep_publish(sweep=sweep, user=coordinator)


# --- The API ----------------------------------------------------------------------------------------------------


def test_the_api_renames_archives_and_deletes_or_says_what_depends(client_for, coordinator, annotator):
    video, kept = make_video(frames=2), make_video(frames=2)
    pair = make_pair(video=kept)
    client = client_for(coordinator)
    renamed = client.post(f"/api/videos/{video.pk}/rename/", {"name": "Garden"}, content_type="application/json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Garden"
    archived = client.post(f"/api/videos/{video.pk}/archive/").json()
    assert archived["archived_at"] is not None
    assert client.post(f"/api/videos/{video.pk}/unarchive/").json()["archived_at"] is None
    refused = client.post(f"/api/videos/{kept.pk}/delete/")
    assert refused.status_code == 409 and "1 pair" in refused.json()["detail"] and str(pair) in refused.json()["detail"]
    assert client.post(f"/api/videos/{video.pk}/delete/").status_code == 204
    assert client.post("/api/videos/999999/archive/").status_code == 404
    study = make_study()
    assert client.post(f"/api/studies/{study.pk}/archive/").json()["archived_at"] is not None
    endpoint = make_endpoint()
    assert client.post(f"/api/models/{endpoint.pk}/delete/").status_code == 204
    collection = make_candidate().collection
    assert client.post(f"/api/collections/{collection.pk}/rename/", {"name": ""}).status_code == 400
    assert client_for(annotator).post(f"/api/videos/{kept.pk}/archive/").status_code == 403


def test_whoever_holds_an_archived_video_may_finish_it_but_nobody_takes_it_anew(annotator, annotator2):
    video = make_video(frames=2)
    assert picking.video_lease_next(user=annotator) == video
    Video.objects.filter(pk=video.pk).update(archived_at="2026-01-01T00:00Z")
    assert picking.video_heartbeat(video=video, user=annotator).lease_holder == annotator
    picking.video_release(video=video, user=annotator, reason=None)  # back in the queue, were it not archived
    assert picking.video_lease_next(user=annotator2) is None
