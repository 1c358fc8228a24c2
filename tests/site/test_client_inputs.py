"""Inputs from outside (issue 24, item 5): each is a 400 with a clear message where it was once a 500 or taken
silently, and the schema says what the endpoints really take and answer. Deep JSON, an endless window size, unknown
filter values, a null draft, too many invites at once, export folder names, CSV downloads, passwords."""

from __future__ import annotations

import codecs
import json

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from annotator.models import Job, Pair
from evaluation.models import Assignment, Participant
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.factories import make_pair, make_video

pytestmark = pytest.mark.django_db
JSON = "application/json"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def ready_participant():
    for category in ("temporal", "state") * 3:
        make_pair(category=category)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    participant = studies.participant_create(study=study)
    participant.consent()
    return participant, participation.participant_next_item(participant=participant)


def test_json_nested_a_thousand_deep_is_a_400_on_the_anonymous_answer_endpoint(client):
    participant, item = ready_participant()
    url = f"/api/p/{participant.token}/item/{item.token}/answer/"
    body = '{"option": 1, "x": ' + nested(1000) + "}"
    response = client.post(url, body, content_type=JSON)
    assert response.status_code == 400
    assert response.json()["detail"] == "JSON parse error - nested deeper than 32 levels."
    assert not Assignment.objects.answered().exists()
    # Neither NaN nor Infinity is JSON: refused too, where Python's json would take them.
    response = client.post(url, '{"option": NaN}', content_type=JSON)
    assert response.status_code == 400 and "NaN is not a JSON number" in response.json()["detail"]
    assert client.post(url, '{"option": 1}', content_type=JSON).json() == {"recorded": True}


def test_deep_json_is_a_400_on_the_draft_api_and_the_draft_beacon(client_for, annotator):
    video = make_video(frames=2)
    client = client_for(annotator)
    response = client.put(f"/api/videos/{video.pk}/draft/", '{"state": ' + nested(1000) + "}", content_type=JSON)
    assert response.status_code == 400 and "nested deeper than 32 levels" in response.json()["detail"]
    response = client.post(f"/work/videos/{video.pk}/draft/", {"state": nested(5000)})
    assert response.status_code == 400 and response.json()["errors"] == {"state": ["The draft must be a JSON object."]}


def test_a_null_draft_state_is_refused_as_the_schema_says(client_for, annotator):
    video = make_video(frames=2)
    client = client_for(annotator)
    for state in (None, [], 3):
        response = client.put(f"/api/videos/{video.pk}/draft/", {"state": state}, content_type=JSON)
        assert response.status_code == 400 and "state" in response.json()["errors"], state
    assert client.put(f"/api/videos/{video.pk}/draft/", {"state": {"q": "x"}}, content_type=JSON).status_code == 200
    schema = client.get("/api/schema/", {"format": "json"}).json()
    ref = schema["paths"]["/api/videos/{video_id}/draft/"]["put"]["requestBody"]["content"][JSON]["schema"]["$ref"]
    state = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]["state"]
    assert state["type"] == "object" and not state.get("nullable")


@pytest.mark.parametrize("raw", ["inf", "1e309", "-inf", "Infinity", "nan"])
def test_an_endless_window_size_is_a_400_at_consent(client, raw):
    for category in ("temporal", "state") * 2:
        make_pair(category=category)
    participant = studies.participant_create(study=studies.study_create(name="S", fraction=1, practice_count=0))
    window = {"viewport_width": raw, "viewport_height": "900", "pointer": "fine", "touch_points": "0"}
    response = client.post(f"/p/{participant.token}/consent/", {"agree": "yes", **window})
    assert response.status_code == 400 and "expected a whole number of pixels" in response.content.decode()
    participant.refresh_from_db()
    assert participant.consented_at is None


def test_the_jobs_list_refuses_an_unknown_status_or_kind(client_for, coordinator):
    Job.objects.create(kind=Job.Kind.EXPORT, title="Export", status=Job.Status.SUCCEEDED)
    client = client_for(coordinator)
    for query in ({"status": "bogus"}, {"status": ""}, {"kind": "nope"}):
        response = client.get("/api/jobs/", query)
        assert response.status_code == 400, query
        assert list(response.json()["errors"]) == list(query)
    assert len(client.get("/api/jobs/", {"status": "succeeded"}).json()["results"]) == 1
    assert client.get("/api/jobs/", {"status": "failed"}).json()["results"] == []


def test_invites_are_bounded_per_request_made_in_one_insert_and_the_409_is_in_the_schema(
    client_for, coordinator, django_assert_max_num_queries
):
    for category in ("temporal", "state") * 3:
        make_pair(category=category)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    client = client_for(coordinator)
    url = f"/api/studies/{study.pk}/invites/create/"
    response = client.post(url, {"count": studies.INVITES_MAX + 1}, content_type=JSON)
    assert response.status_code == 400 and f"{studies.INVITES_MAX}" in str(response.json()["errors"]["count"])
    with django_assert_max_num_queries(20):  # not one INSERT per invite
        response = client.post(url, {"count": studies.INVITES_MAX}, content_type=JSON)
    assert response.status_code == 201
    assert len({invite["url"] for invite in response.json()}) == studies.INVITES_MAX
    assert Participant.objects.filter(study=study).count() == studies.INVITES_MAX
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/studies/{id}/invites/create/"]["post"]
    assert "409" in operation["responses"]
    ref = operation["requestBody"]["content"][JSON]["schema"]["$ref"]
    count = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]["count"]
    assert count["maximum"] == studies.INVITES_MAX


@pytest.mark.parametrize("name", ['"><b', "~root", "a b", "..", "x.y", "é", "a/b"])
def test_an_export_folder_name_is_letters_digits_dash_and_underscore_only(client_for, coordinator, name):
    make_pair()
    client = client_for(coordinator)
    response = client.post("/api/exports/start/", {"target": name}, content_type=JSON)
    assert response.status_code == 400 and "letters, digits, - and _" in str(response.json()["errors"]["target"])
    assert not Job.objects.filter(kind=Job.Kind.EXPORT).exists()


def test_the_responses_csv_is_utf8_with_a_bom(client_for, coordinator):
    make_pair(answer="la tasse a bougé", distractors=["rien n'a changé"])
    study = studies.study_create(name="Étude", fraction=1, practice_count=0, invites=1)
    participant = study.participants.get()
    participation.participant_consent(participant=participant, params={"PROLIFIC_PID": "Zoë"})
    while (a := participation.participant_next_item(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=a.token, position=1)
    response = client_for(coordinator).get(f"/studies/{study.pk}/responses.csv")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response.content.startswith(codecs.BOM_UTF8) and not response.content[3:].startswith(codecs.BOM_UTF8)
    assert "Zoë" in response.content.decode("utf-8-sig")


def test_the_standard_password_validators_are_on():
    for weak in ("password", "demo", "12345678901"):
        with pytest.raises(ValidationError):
            validate_password(weak)
    validate_password("violet-harbour-quietly-47")


def test_a_filter_sent_in_a_form_is_read_as_its_json_never_as_every_row(client_for, coordinator):
    """DRF reads `filter=<text>` in a form body as an empty filter: a bulk action on every pair."""
    submitted = make_pair(status=Pair.Status.SUBMITTED)
    make_pair(), make_pair()
    client = client_for(coordinator)
    response = client.post("/api/pairs/bulk/", {"action": "accept", "filter": json.dumps({"status": "submitted"})})
    assert response.status_code == 202, response.content
    assert response.json()["total"] == 1 and response.json()["result"]["items"] == 1
    for text in ("not json", "[1, 2]", ""):
        response = client.post("/api/pairs/bulk/", {"action": "accept", "filter": text})
        assert response.status_code == 400 and "filter" in response.json()["errors"], text
    assert Pair.objects.get(pk=submitted.pk).status == Pair.Status.SUBMITTED  # the job is queued, not run


def test_a_value_of_the_wrong_type_is_refused_not_converted(client_for, coordinator):
    make_pair()
    client = client_for(coordinator)
    response = client.post("/api/exports/start/", {"target": 0}, content_type=JSON)
    assert response.status_code == 400 and response.json()["errors"]["target"] == ["Not a valid string."]
    batch = {"title": "B", "selection": "all", "allow_own_pairs": 0}
    response = client.post("/api/captions/batches/create/", batch, content_type=JSON)
    assert response.status_code == 400 and "allow_own_pairs" in response.json()["errors"]
    response = client.post("/api/captions/batches/create/", {**batch, "allow_own_pairs": False}, content_type=JSON)
    assert response.status_code == 201, response.content
    assert not Job.objects.filter(kind=Job.Kind.EXPORT).exists()
