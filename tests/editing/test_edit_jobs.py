"""Edit jobs against a loopback fake editing server: candidates with regions over the change, one image's failure
(a refusal, no answer in time, garbage, a wrong size) never the job's, the check of the edit (accept, refuse)."""

from __future__ import annotations

import pytest

from annotator.collections.authoring import candidate_lease_next
from annotator.editing.services import (
    EDIT_TASK,
    edit_accept,
    edit_job_run,
    edit_job_start,
    edit_refuse,
    edit_template,
    edit_template_update,
)
from annotator.jobs.services import UnitRef
from annotator.models import ImageEdit, Job, PairCandidate
from subtlebench.errors import Conflict, Forbidden, Invalid
from tests.editing.edit_fixtures import SIZE, make_collection
from tests.editing.edit_server import EDIT_BOX

pytestmark = pytest.mark.django_db


def start(user, collection, images, endpoint, kind="colour", **options) -> Job:
    options.setdefault("object_name", "blue ball")
    options.setdefault("value", "red")
    return edit_job_start(
        user=user,
        collection_id=collection.pk,
        kind=kind,
        endpoint_id=endpoint.pk,
        image_ids=[image.pk for image in images],
        **options,
    )


def run(job: Job) -> Job:
    unit = job.tasks.get()
    edit_job_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id=f"test-{unit.pk}"))
    job.refresh_from_db()
    return job


def covers(region: dict, box) -> bool:
    x0, y0, x1, y1 = box
    return region["x"] <= x0 and region["y"] <= y0 and region["x"] + region["w"] > x1 and region["y"] + region["h"] > y1


def test_it_makes_a_candidate_per_image_with_regions_covering_the_change(coordinator, edit_server, editor_endpoint):
    collection, images = make_collection([10, 20])
    job = start(coordinator, collection, images, editor_endpoint)
    assert job.kind == Job.Kind.EDIT and job.tasks.get().name == EDIT_TASK
    job = run(job)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert job.result["counts"]["to_check"] == 2 and job.result["candidates"] == 2
    sent = edit_server.requests[0]
    assert sent["model"] == "edit-1" and sent["size"] == f"{SIZE[0]}x{SIZE[1]}"
    assert sent["response_format"] == "b64_json"
    assert sent["prompt"].startswith("Change the colour of the blue ball to red.")
    for image in images:
        edit = ImageEdit.objects.get(job=job, image=image)
        candidate = edit.candidate
        assert edit.status == ImageEdit.Status.TO_CHECK and edit.error == ""
        assert (candidate.image_1, candidate.image_2) == (image, edit.edited_image)
        assert (edit.edited_image.width, edit.edited_image.height) == SIZE
        assert candidate.origin == PairCandidate.Origin.EDITED and candidate.category == "attribute"
        assert candidate.status == PairCandidate.Status.EDIT_CHECK
        assert (candidate.source, candidate.collection, candidate.domain) == ("photos", collection, "natural")
        assert (edit.question, edit.answer) == ("What changed about the blue ball?", "Its colour changed to red.")
        on_two = [region for region in candidate.regions if region["image"] == 2]
        on_one = [region for region in candidate.regions if region["image"] == 1]
        assert len(on_two) == 1 and covers(on_two[0], EDIT_BOX) and on_one == [{**on_two[0], "image": 1}]
        # Tight: the box is the change, a pixel to spare (not the whole image).
        assert on_two[0]["w"] <= EDIT_BOX[2] - EDIT_BOX[0] + 3 and on_two[0]["h"] <= EDIT_BOX[3] - EDIT_BOX[1] + 3
    # Not authorable before a person accepted the edit.
    assert not PairCandidate.objects.open().filter(job=job).exists()


def test_a_refusal_no_answer_in_time_garbage_and_a_wrong_size_each_fail_their_image_alone(
    coordinator, edit_server, editor_endpoint
):
    collection, images = make_collection([10, 30, 40, 50, 60])
    edit_server.faults.update({30: "refuse", 40: "slow", 50: "garbage", 60: "wrong-size"})
    job = run(start(coordinator, collection, images, editor_endpoint))
    assert job.status == Job.Status.SUCCEEDED and job.done == 5
    edits = {edit.image_id: edit for edit in ImageEdit.objects.filter(job=job)}
    good, refused, slow, garbage, wrong = (edits[image.pk] for image in images)
    assert good.status == ImageEdit.Status.TO_CHECK and good.candidate is not None
    for edit in (refused, slow, garbage, wrong):
        assert edit.status == ImageEdit.Status.FAILED and edit.candidate is None and edit.edited_image is None
    assert "HTTP 400" in refused.error and "safety system" in refused.error
    assert "no answer from the endpoint within 1 s" in slow.error
    assert "not an image" in garbage.error
    assert "72×48, the original 64×48" in wrong.error
    assert len(job.errors) == 4 and any("photo-30.png" in error for error in job.errors)
    assert PairCandidate.objects.filter(job=job).count() == 1


def test_accepting_puts_the_candidate_in_the_queue_and_refusing_keeps_the_reason(
    coordinator, reviewer, annotator, edit_server, editor_endpoint
):
    collection, images = make_collection([10, 20])
    job = run(start(coordinator, collection, images, editor_endpoint))
    first, second = ImageEdit.objects.filter(job=job).order_by("pk")
    assert candidate_lease_next(user=annotator) is None  # nothing authorable yet
    with pytest.raises(Forbidden):
        edit_accept(user=annotator, edit=first)
    edit_accept(user=reviewer, edit=first)
    first.refresh_from_db()
    assert first.status == ImageEdit.Status.ACCEPTED and first.checked_by == reviewer
    assert candidate_lease_next(user=annotator) == first.candidate
    with pytest.raises(Conflict):
        edit_refuse(user=reviewer, edit=first, reason="not_asked")
    with pytest.raises(Invalid) as refused:
        edit_refuse(user=reviewer, edit=second, reason="other")
    assert "note" in refused.value.errors
    edit_refuse(user=coordinator, edit=second, reason="not_intact", note="the table moved too")
    second.refresh_from_db()
    assert (second.status, second.refuse_reason, second.refuse_note) == ("refused", "not_intact", "the table moved too")
    assert second.candidate.status == PairCandidate.Status.DISMISSED and second.candidate.dismissed_by == coordinator


def test_start_refuses_bad_choices_by_field(coordinator, annotator, editor_endpoint):
    collection, images = make_collection([10])
    _, others = make_collection([20], name="others")
    with pytest.raises(Forbidden):
        start(annotator, collection, images, editor_endpoint)
    with pytest.raises(Invalid) as refused:
        start(coordinator, collection, others, editor_endpoint, object_name="", value="")
    assert {"images", "object_name", "value"} <= set(refused.value.errors)
    with pytest.raises(Invalid) as refused:
        start(coordinator, collection, images, editor_endpoint, kind="weather")
    assert "kind" in refused.value.errors
    assert not Job.objects.filter(kind=Job.Kind.EDIT).exists()


def test_a_template_is_edited_and_used_by_the_next_job(coordinator, reviewer, edit_server, editor_endpoint):
    template = edit_template("removed")
    with pytest.raises(Forbidden):
        edit_template_update(user=reviewer, template=template, instruction="x", question="", answer="")
    with pytest.raises(Invalid) as refused:
        edit_template_update(
            user=coordinator, template=template, instruction="Erase the {thing}", question="", answer=""
        )
    assert "instruction" in refused.value.errors
    edit_template_update(
        user=coordinator, template=template, instruction="Erase the {object}.", question="What vanished?", answer="x"
    )
    collection, images = make_collection([10])
    job = run(start(coordinator, collection, images, editor_endpoint, kind="removed", object_name="cup", value=""))
    assert edit_server.requests[-1]["prompt"] == "Erase the cup."
    edit = ImageEdit.objects.get(job=job)
    assert (edit.question, edit.candidate.category) == ("What vanished?", "existence")


def test_a_vision_model_names_the_object_in_each_image(coordinator, edit_server, editor_endpoint):
    from annotator.models import ModelEndpoint
    from tests.model_server import ModelServer

    namer_server = ModelServer().start()
    try:
        namer_server.reply = lambda seen: "Red mug." if len(seen.images) == 1 else None
        namer = ModelEndpoint.objects.create(name="namer", base_url=namer_server.base_url, model_id="tiny-vlm")
        collection, images = make_collection([10])
        job = run(start(coordinator, collection, images, editor_endpoint, object_name="", namer_id=namer.pk))
    finally:
        namer_server.stop()
    edit = ImageEdit.objects.get(job=job)
    assert (edit.status, edit.object_name) == ("to_check", "red mug")
    assert edit.instruction.startswith("Change the colour of the red mug to red.")
    assert edit.question == "What changed about the red mug?"
    assert edit_server.requests[0]["prompt"] == edit.instruction


def test_a_retry_asks_again_for_the_images_that_failed(coordinator, edit_server, editor_endpoint):
    from annotator.jobs.services import job_retry

    collection, images = make_collection([10, 30])
    edit_server.faults[30] = "refuse"
    first = run(start(coordinator, collection, images, editor_endpoint))
    assert first.result["counts"]["failed"] == 1
    del edit_server.faults[30]
    assert first.status == Job.Status.SUCCEEDED and first.can_retry
    again = run(job_retry(job=first, user=coordinator))
    (edit,) = ImageEdit.objects.filter(job=again)
    assert (edit.image, edit.status) == (images[1], ImageEdit.Status.TO_CHECK)
    assert edit.instruction.startswith("Change the colour of the blue ball to red.")
