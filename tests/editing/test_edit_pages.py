"""The pages of edit jobs: who may open them, the start form (a refused one says why), the job's page, the check."""

from __future__ import annotations

import pytest

from annotator.editing.services import edit_job_run, edit_job_start
from annotator.jobs.services import UnitRef
from annotator.models import EditTemplate, ImageEdit, Job, PairCandidate
from tests.editing.edit_fixtures import make_collection

pytestmark = pytest.mark.django_db


def made_edit(coordinator, endpoint, shades=(10,)) -> ImageEdit:
    collection, images = make_collection(list(shades))
    job = edit_job_start(
        user=coordinator,
        collection_id=collection.pk,
        kind="colour",
        endpoint_id=endpoint.pk,
        image_ids=[image.pk for image in images],
        object_name="ball",
        value="red",
    )
    edit_job_run(job_id=job.pk, unit=UnitRef(job.tasks.get().pk, celery_id="pages"))
    return ImageEdit.objects.filter(job=job).order_by("pk").first()


@pytest.mark.parametrize("url", ["/edits/", "/edits/check/", "/edits/jobs/1/", "/edits/1/"])
def test_an_anonymous_visitor_is_sent_to_log_in(client, url):
    response = client.get(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_an_annotator_may_not_start_or_check(client_for, annotator):
    client = client_for(annotator)
    assert client.get("/edits/").status_code == 403
    assert client.get("/edits/check/").status_code == 403
    assert client.post("/edits/1/accept/").status_code == 403


def test_a_reviewer_checks_edits_but_does_not_start_jobs(client_for, reviewer):
    client = client_for(reviewer)
    assert client.get("/edits/").status_code == 403
    assert client.get("/edits/check/").status_code == 200


def test_the_targets_of_forms_take_only_a_post(client_for, coordinator):
    client = client_for(coordinator)
    assert client.get("/edits/1/accept/").status_code == 302  # back to the page of the form
    assert client.put("/edits/1/refuse/").status_code == 405
    assert client.put("/edits/").status_code == 405


def test_the_form_starts_a_job_and_a_refused_one_says_why(client_for, coordinator, editor_endpoint):
    collection, images = make_collection([10, 20])
    client = client_for(coordinator)
    page = client.get(f"/edits/?collection={collection.pk}")
    assert page.status_code == 200 and "photo-10.png" in page.content.decode()
    form = {
        "collection": collection.pk,
        "kind": "colour",
        "endpoint": editor_endpoint.pk,
        "namer": "",
        "object_name": "",
        "value": "red",
        "images": [images[0].pk],
        "idempotency_key": "k1",
    }
    refused = client.post("/edits/", form, follow=True)
    assert "Name the object, or choose a model" in refused.content.decode()
    assert not Job.objects.filter(kind=Job.Kind.EDIT).exists()
    form["object_name"] = "ball"
    started = client.post("/edits/", form)
    job = Job.objects.get(kind=Job.Kind.EDIT)
    assert started["Location"] == f"/edits/jobs/{job.pk}/"
    assert client.post("/edits/", form)["Location"] == f"/edits/jobs/{job.pk}/"  # the same key: the same job
    assert list(ImageEdit.objects.filter(job=job).values_list("image", flat=True)) == [images[0].pk]
    assert "Change the colour of the ball to red." in client.get(f"/edits/jobs/{job.pk}/").content.decode()


def test_a_template_is_saved_from_the_page(client_for, coordinator):
    client = client_for(coordinator)
    form = {"instruction": "Paint the {object} {value}.", "question": "What colour?", "answer": "{value}"}
    assert client.post("/edits/templates/colour/", form).status_code == 302
    assert EditTemplate.objects.get(kind="colour").instruction == "Paint the {object} {value}."
    form["instruction"] = "Paint the {thing}."
    response = client.post("/edits/templates/colour/", form, follow=True)
    assert "Unknown placeholder" in response.content.decode()
    assert EditTemplate.objects.get(kind="colour").instruction == "Paint the {object} {value}."


def test_the_check_page_accepts_and_refuses(client_for, reviewer, coordinator, edit_server, editor_endpoint):
    edit = made_edit(coordinator, editor_endpoint)
    client = client_for(reviewer)
    assert client.get("/edits/check/")["Location"] == f"/edits/{edit.pk}/"
    page = client.get(f"/edits/{edit.pk}/").content.decode()
    assert "Change the colour of the ball to red." in page and page.count('class="edit-box"') == 2
    refused = client.post(f"/edits/{edit.pk}/refuse/", {"reason": "other", "note": ""}, follow=True)
    assert "Say in a note" in refused.content.decode()
    assert client.post(f"/edits/{edit.pk}/refuse/", {"reason": "no_change"})["Location"] == "/edits/check/"
    edit.refresh_from_db()
    assert edit.status == "refused" and edit.refuse_reason == "no_change"
    assert edit.candidate.status == PairCandidate.Status.DISMISSED
    # Decided: a second decision is refused with the reason, the page says how it was decided.
    again = client.post(f"/edits/{edit.pk}/accept/", follow=True).content.decode()
    assert "only an edit to check can be decided" in again
    assert "nothing (visible) changed" in client.get(f"/edits/{edit.pk}/").content.decode()


def test_the_api_starts_a_job_lists_its_edits_and_decides_them(
    client_for, coordinator, reviewer, annotator, edit_server, editor_endpoint
):
    collection, images = make_collection([10, 20])
    client = client_for(coordinator)
    body = {"collection": collection.pk, "kind": "colour", "endpoint": editor_endpoint.pk, "images": [images[0].pk]}
    refused = client.post("/api/edit-jobs/", body, content_type="application/json")
    assert refused.status_code == 400 and set(refused.json()["errors"]) == {"object_name", "value"}
    body.update(object_name="ball", value="red", images=[image.pk for image in images])
    started = client.post("/api/edit-jobs/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="api-1")
    assert started.status_code == 202
    job = Job.objects.get(pk=started.json()["job_id"])
    again = client.post("/api/edit-jobs/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="api-1")
    assert again.json()["job_id"] == job.pk
    edit_job_run(job_id=job.pk, unit=UnitRef(job.tasks.get().pk, celery_id="api"))
    assert client_for(annotator).get(f"/api/edit-jobs/{job.pk}/edits/").status_code == 403
    checker = client_for(reviewer)
    edits = checker.get(f"/api/edit-jobs/{job.pk}/edits/").json()
    assert [edit["status"] for edit in edits] == ["to_check", "to_check"]
    assert edits[0]["instruction"].startswith("Change the colour of the ball to red.")
    accepted = checker.post(f"/api/edits/{edits[0]['id']}/accept/")
    assert accepted.status_code == 200 and accepted.json()["status"] == "accepted"
    assert checker.post(f"/api/edits/{edits[0]['id']}/accept/").status_code == 409
    bad = checker.post(f"/api/edits/{edits[1]['id']}/refuse/", {"reason": "maybe"}, content_type="application/json")
    assert bad.status_code == 400 and "reason" in bad.json()["errors"]
    refused = checker.post(
        f"/api/edits/{edits[1]['id']}/refuse/", {"reason": "not_asked"}, content_type="application/json"
    )
    assert refused.json()["refuse_reason"] == "not_asked"
    assert PairCandidate.objects.get(pk=edits[0]["candidate"]).status == PairCandidate.Status.OPEN
