"""Text in, safely: control characters are refused with a 400 naming the field (query strings, forms, API bodies),
every free text has a length limit (model, serializer, editor), and lists have a maximum page size."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.db import models

from annotator.models import Job, Pair, PairDraft, VideoSkip
from evaluation.models import Participant, Study
from evaluation.studies import services as studies
from subtlebench.errors import Invalid
from subtlebench.text import QUESTION_MAX, control_character
from tests.factories import make_pair, make_video

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def api_error(response, status: int = 400) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    return response.json()


def open_study() -> Study:
    for _ in range(4):
        make_pair()
    return studies.study_create(name="Open", fraction=0.5, practice_count=1, open_cap=5)


# --- Control characters ------------------------------------------------------------------------------------


def test_a_nul_in_a_participant_link_is_refused_naming_the_parameter(client):
    study = open_study()
    response = client.get(f"/p/open/{study.open_token}/?PROLIFIC_PID=%00")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert b"PROLIFIC_PID" in response.content and b"NUL" in response.content
    assert not Participant.objects.exists()  # nobody was admitted


def test_a_nul_in_an_api_query_is_refused_naming_the_parameter(client_for, annotator):
    body = api_error(client_for(annotator).get("/api/jobs/?status=%00"))
    assert list(body["errors"]) == ["status"]
    assert "NUL (U+0000)" in body["errors"]["status"][0] and body["detail"].startswith("status: ")


def test_other_c0_controls_are_refused_and_every_value_of_a_repeated_parameter_is_checked(client_for, annotator):
    body = api_error(client_for(annotator).get("/api/videos/?status=sampled&x=ok&x=b%1Bad"))
    assert list(body["errors"]) == ["x.1"] and "U+001B" in body["detail"]
    body = api_error(client_for(annotator).get("/api/videos/?na%07me=1"))
    assert "A field name" in body["detail"]


def test_a_control_character_in_an_address_names_nothing(client, client_for, annotator):
    assert client.get("/p/%00/").status_code == 404
    response = client_for(annotator).get("/api/videos/%00/")
    assert api_error(response, 404)["detail"]


def test_a_nul_in_a_page_form_is_refused_and_nothing_is_stored(client_for, coordinator):
    make_pair()
    response = client_for(coordinator).post("/studies/create/", {"name": "Bad\x00name", "fraction": "1", "seed": "0"})
    assert response.status_code == 400
    assert b"name" in response.content and b"NUL" in response.content
    assert not Study.objects.exists()


def test_a_page_script_that_asks_for_json_gets_the_json_error_body(client_for, annotator):
    response = client_for(annotator).post(
        "/captions/tasks/1/draft/", {"text": "a\x00b"}, HTTP_ACCEPT="application/json"
    )
    assert list(api_error(response)["errors"]) == ["text"]


def test_a_participant_answer_with_an_infinite_time_is_not_a_server_error(client):
    study = open_study()
    participant = studies.participant_create(study=study)
    participant.consent()
    from evaluation.studies import participation

    while (assignment := participation.participant_next_practice(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=assignment.token, position=1)
    item = participation.participant_next_item(participant=participant)
    response = client.post(f"/p/{participant.token}/items/{item.token}/", {"option": "1", "active_ms": "1e999"})
    assert response.status_code == 302
    item.refresh_from_db()
    assert item.answered_at is not None and item.active_ms is not None


def test_a_nul_anywhere_in_a_json_body_is_refused_naming_its_path(client_for, annotator):
    video = make_video(frames=2)
    client = client_for(annotator)
    state = {"question": "Which?", "options": ["fine", "bad\u0000"]}
    response = client.put(f"/api/videos/{video.pk}/draft/", {"state": state}, content_type="application/json")
    body = api_error(response)
    assert list(body["errors"]) == ["state.options.1"] and "NUL" in body["detail"]
    assert not PairDraft.objects.exists()
    # The same draft without it is kept.
    state["options"][1] = "fine\tand\nmulti-line"
    ok = client.put(f"/api/videos/{video.pk}/draft/", {"state": state}, content_type="application/json")
    assert ok.status_code == 200 and PairDraft.objects.get().state == state


def test_a_form_body_sent_with_put_is_checked_too(client_for, annotator):
    video = make_video(frames=2)
    response = client_for(annotator).put(
        f"/api/videos/{video.pk}/draft/", "state=%00", content_type="application/x-www-form-urlencoded"
    )
    assert list(api_error(response)["errors"]) == ["state"]


def test_single_line_fields_refuse_line_breaks_and_multi_line_fields_keep_them(client_for, coordinator, annotator):
    make_pair()
    response = client_for(coordinator).post(
        "/api/studies/create/", {"name": "Two\nlines", "fraction": 1}, content_type="application/json"
    )
    assert "one line" in api_error(response)["errors"]["name"][0]
    video = make_video(frames=2)
    client = client_for(annotator)
    assert client.post("/api/work/lease/").json()["video"]["id"] == video.pk
    note = "Blurry.\nAnd\tshaky."
    response = client.post(
        f"/api/videos/{video.pk}/release/", {"reason": "bad_video", "note": note}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert VideoSkip.objects.get().note == note


def test_control_character_detection():
    assert control_character("plain text, ünïcode") is None
    assert control_character("tab\tnewline\ncr\r") is None
    assert control_character("tab\t", multi_line=False) == "U+0009"
    assert control_character("a\x00") == "U+0000"
    assert control_character("del\x7f") == "U+007F"


def test_a_malformed_multipart_body_is_a_400_in_the_right_shape(client_for, coordinator):
    client = client_for(coordinator)
    page = client.post("/studies/create/", b"x", content_type="multipart/form-data")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")
    assert b"could not be read" in page.content


# --- Length limits -----------------------------------------------------------------------------------------


def test_a_one_megabyte_question_is_refused_and_nothing_is_stored(client_for, annotator):
    video = make_video(frames=2)
    body = {
        "video": video.pk,
        "index_a": 0,
        "index_b": 1,
        "category": "temporal",
        "question": "Which image was taken later?" + "x" * 1024 * 1024,
        "answer_frame": "b",
        "client_key": "k1",
    }
    response = client_for(annotator).post("/api/pairs/submit/", body, content_type="application/json")
    error = api_error(response)
    assert list(error["errors"]) == ["question"] and f"no more than {QUESTION_MAX}" in error["detail"]
    assert not Pair.objects.exists()


def test_a_long_question_from_the_workbench_form_is_refused_by_the_service(annotator):
    from annotator.picking.questions import question_validate

    with pytest.raises(Invalid) as raised:
        question_validate(category="temporal", question="q" * (QUESTION_MAX + 1), answer="", distractors=[])
    assert list(raised.value.errors) == ["question"]
    with pytest.raises(Invalid) as raised:
        question_validate(category="spatial", question="How?", answer="left", distractors=["right"] * 21)
    assert "at most 20" in raised.value.errors["distractors"][0]


def test_the_model_refuses_oversized_text_whoever_saves_it():
    pair = make_pair()
    pair.question = "x" * (QUESTION_MAX + 1)
    with pytest.raises(Invalid) as raised:
        pair.save()
    assert list(raised.value.errors) == ["question"]
    with pytest.raises(Invalid, match="NUL"):
        Job.objects.create(kind=Job.Kind.IMPORT, title="bad\x00")
    video = make_video(frames=1)
    video.labels = ["fine", "l" * 101]
    with pytest.raises(Invalid) as raised:
        video.save()
    assert list(raised.value.errors) == ["labels"]  # each item of a list of texts is held to its column
    # A long job title (made of a typed path) is clipped instead.
    assert len(Job.objects.create(kind=Job.Kind.IMPORT, title="t" * 400).title) == 300


def test_a_300_character_export_name_is_refused_by_the_api_and_the_page(client_for, coordinator):
    make_pair()
    client = client_for(coordinator)
    response = client.post("/api/exports/start/", {"target": "n" * 300}, content_type="application/json")
    assert list(api_error(response)["errors"]) == ["target"]
    response = client.post("/api/exports/start/", {"target": "n" * 101}, content_type="application/json")
    assert "at most 100" in api_error(response)["errors"]["target"][0]
    page = client.post("/exports/", {"target": "n" * 300, "val_fraction": "0.1", "seed": "0"}, follow=True)
    assert page.redirect_chain == [("/exports/", 302)] and b"at most" in page.content
    assert not Job.objects.exists()


def test_a_seed_beyond_the_column_is_refused_not_a_server_error(client_for, coordinator):
    make_pair()
    client = client_for(coordinator)
    response = client.post("/api/studies/create/", {"name": "S", "seed": 2**42}, content_type="application/json")
    assert list(api_error(response)["errors"]) == ["seed"]
    page = client.post("/studies/create/", {"name": "S", "fraction": "1", "seed": str(2**42)})
    assert page.status_code == 302 and page["Location"] == "/studies/"  # Post/Redirect/Get: the form shows why
    assert "seed" in client.get(page["Location"]).context["form"].errors
    assert not Study.objects.exists()


def test_every_free_text_column_has_a_length_limit():
    unbounded = [
        f"{model.__name__}.{field.name}"
        for app in ("annotator", "evaluation")
        for model in apps.get_app_config(app).get_models()
        for field in model._meta.concrete_fields
        if isinstance(field, models.TextField) and not field.max_length
    ]
    # Written by the server, never typed: errors of sampling, embedding and job units, a caption's search text, and
    # a release's lines and card exactly as the export wrote them.
    server_written = {
        "Video.error", "Caption.normalized", "ImageEmbedding.error", "JobTask.error",
        "Release.card", "ReleaseItem.line", "ReleaseItem.provenance",
    }  # fmt: skip
    assert set(unbounded) <= server_written, unbounded


def test_every_text_input_of_every_editor_has_a_maxlength():
    missing = []
    for template in TEMPLATES.rglob("*.html"):
        for tag in re.findall(r"<(?:textarea|input)\b[^>]*>", template.read_text()):
            kind = re.search(r'type="(\w+)"', tag)
            if kind and kind.group(1) in ("hidden", "checkbox", "radio", "submit", "number", "file", "range"):
                continue
            if "maxlength=" not in tag:
                missing.append(f"{template.relative_to(TEMPLATES)}: {tag}")
    assert not missing, "\n".join(missing)


def test_the_editors_limits_are_the_models(client_for, annotator):
    video = make_video(frames=2)
    client_for(annotator).post("/api/work/lease/")
    page = client_for(annotator).get(f"/work/videos/{video.pk}/").content.decode()
    assert f'id="question" name="question" maxlength="{QUESTION_MAX}"' in page
    question = Pair._meta.get_field("question")
    assert question.max_length == QUESTION_MAX


# --- Page sizes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["limit=1e8", "limit=100000000", "limit=abc", "limit=0", "offset=-1", "offset=x"])
def test_a_page_size_or_offset_out_of_bounds_is_refused_naming_it(client_for, annotator, query):
    body = api_error(client_for(annotator).get(f"/api/jobs/?{query}"))
    assert list(body["errors"]) == [query.split("=")[0]]


def test_the_largest_page_is_served(client_for, coordinator):
    for index in range(3):
        Job.objects.create(kind=Job.Kind.IMPORT, title=f"Import {index}")
    body = client_for(coordinator).get("/api/jobs/?limit=500&offset=1").json()
    assert body["count"] == 3 and len(body["results"]) == 2


def test_the_schema_documents_the_page_bounds(client_for, coordinator):
    schema = client_for(coordinator).get("/api/schema/", {"format": "json"}).json()
    limit = next(p for p in schema["paths"]["/api/jobs/"]["get"]["parameters"] if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 500 and limit["schema"]["minimum"] == 1
    assert json.dumps(schema)  # the schema itself has no control character problem
