"""Issue 14, parts 4-7 without a browser: an example question is a valid question everywhere, every form target
answers Post/Redirect/Get, and the review's correction edits what the editor can while the similarity rule holds."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from annotator.export.pair_import import pairs_import
from annotator.models import Pair
from annotator.picking import services as picking
from annotator.picking.questions import question_validate, template_table
from annotator.similarity.services import current_fingerprint
from benchmark.records import record_problems
from benchmark.taxonomy import BINARY_CATEGORIES, EXAMPLE_QUESTIONS, STANDARD_QUESTIONS
from tests.conftest import make_user
from tests.export_fixtures import record, write_dataset
from tests.factories import make_video

pytestmark = pytest.mark.django_db

OPTIONS = {"answer": "raised a hand", "distractors": ["sat down"]}


def spellings(text: str) -> list[str]:
    """The example as typed carelessly: other case, extra spaces, no or other punctuation."""
    return [text, text.upper(), f"  {text.lower()}  ", text.rstrip("?"), text.replace(" ", "   ") + "!!"]


def fitting_options(category: str) -> dict:
    if category in BINARY_CATEGORIES:
        return {"answer": "second image", "distractors": ["first image"]}
    if category == "existence":
        return {"answer": "a bag", "distractors": ["a cat", "a cup", "a hat"]}
    return OPTIONS


@pytest.mark.parametrize("category", sorted(EXAMPLE_QUESTIONS))
def test_the_editor_accepts_every_example_however_it_is_spelled(category):
    for question in spellings(EXAMPLE_QUESTIONS[category]):
        cleaned, *_ = question_validate(category=category, question=question, **fitting_options(category))
        assert cleaned == " ".join(question.split())


@pytest.mark.parametrize("category", sorted(STANDARD_QUESTIONS))
def test_the_standard_temporal_and_viewpoint_questions_are_filled_in(category):
    answer, distractors = ("second image", ["first image"]) if category == "temporal" else ("left", ["right"])
    question_validate(category=category, question=STANDARD_QUESTIONS[category], answer=answer, distractors=distractors)
    table = template_table()
    assert table[category]["example"] is False
    assert all(table[c]["example"] for c in EXAMPLE_QUESTIONS), "the others are placeholders"


def test_the_api_takes_an_example_question_as_it_is(client_for, annotator):
    video = make_video(frames=3)
    picking.video_heartbeat(video=video, user=annotator)
    response = client_for(annotator).post(
        "/api/pairs/submit/",
        {
            "video": video.pk,
            "index_a": 0,
            "index_b": 1,
            "category": "attribute",
            "question": "what changed about the MUG",
            "answer": "red",
            "distractors": ["blue"],
            "client_key": uuid.uuid4().hex,
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert Pair.objects.get().question == "what changed about the MUG"


def test_the_import_and_the_export_validator_take_an_example_question(tmp_path):
    example = EXAMPLE_QUESTIONS["existence"]
    assert record_problems(record(1, question=example.lower())) == []
    assert (
        pairs_import(folder=write_dataset(tmp_path / "in", [record(1), record(2, question=example.lower())]))["pairs"]
        == 2
    )


# --- Post/Redirect/Get -----------------------------------------------------------------------------------------


def page_paths(patterns=None, prefix=""):
    """Every HTML address of the app, with a sample value for each path parameter."""
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        route = prefix + str(entry.pattern)
        if route.startswith(("api/", "admin/", "^media")):
            continue
        if isinstance(entry, URLResolver):
            yield from page_paths(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            yield "/" + re.sub(r"<int:\w+>", "1", re.sub(r"<str:\w+>", "x", route))


def test_no_page_answers_a_get_with_a_blank_405(client_for):
    everyone = make_user("all", "annotator", "reviewer", "coordinator")
    client = client_for(everyone)
    paths = list(page_paths())
    assert "/captions/tasks/1/submit/" in paths and "/accounts/logout/" in paths
    for path in paths:
        response = client.get(path)
        assert response.status_code != 405, f"GET {path} is a blank 405"


@pytest.mark.parametrize(
    ("path", "to"),
    [
        ("/captions/tasks/{task}/submit/", "/captions/tasks/{task}/"),
        ("/captions/tasks/{task}/skip/", "/captions/tasks/{task}/"),
        ("/captions/batches/", "/captions/"),
        ("/review/pairs/{pair}/override/", "/review/pairs/{pair}/"),
        ("/overview/assign/", "/overview/"),
        ("/account/tokens/1/revoke/", "/account/tokens/"),
        ("/accounts/logout/", "/"),
    ],
)
def test_a_get_of_a_form_target_goes_to_the_page_with_the_form(client_for, path, to):
    everyone = make_user("all", "annotator", "reviewer", "coordinator")
    ids = {"task": 7, "pair": 8}
    response = client_for(everyone).get(path.format(**ids))
    assert response.status_code == 302 and response["Location"] == to.format(**ids)


# --- Review ----------------------------------------------------------------------------------------------------


def submitted(author, category="action", **fields):
    video = make_video(frames=3)
    picking.video_heartbeat(video=video, user=author)
    values = {"question": "What did the cyclist do between the two images?", **OPTIONS, **fields}
    pair, _ = picking.pair_submit(
        user=author, video=video, index_a=0, index_b=2, category=category, client_key=uuid.uuid4().hex, **values
    )
    picking.video_release(video=video, user=author)
    return pair


def passing(pair):
    Pair.objects.filter(pk=pair.pk).update(similarity=0.93, similarity_model=current_fingerprint())


def review(client, pair, **corrections):
    return client.post(
        f"/api/pairs/{pair.pk}/review/",
        {"decision": "correct", "version": pair.version, "corrections": corrections},
        content_type="application/json",
    )


def test_the_review_page_turns_accept_off_with_the_reason(client_for, annotator, reviewer):
    pair = submitted(annotator)
    page = client_for(reviewer).get(f"/review/pairs/{pair.pk}/").content.decode()
    assert re.search(r'<button class="primary" type="button" id="accept" disabled', page)
    assert "Accept is off: the similarity is not computed yet" in page
    Pair.objects.filter(pk=pair.pk).update(similarity=0.5, similarity_model=current_fingerprint())
    page = client_for(reviewer).get(f"/review/pairs/{pair.pk}/").content.decode()
    assert "Accept is off: the similarity is below the threshold" in page
    assert re.search(r'id="save-correction" disabled', page)
    passing(pair)
    page = client_for(reviewer).get(f"/review/pairs/{pair.pk}/").content.decode()
    assert re.search(r'id="accept">', page) and "Accept is off" not in page


def test_a_correction_adds_and_removes_distractors_and_changes_the_category(client_for, annotator, reviewer):
    pair = submitted(annotator)
    passing(pair)
    response = review(
        client_for(reviewer),
        pair,
        category="existence",
        question="What appeared on the bench?",
        answer="a bag",
        distractors=["a cat", "a cup", "a hat"],
    )
    assert response.status_code == 200, response.content
    pair.refresh_from_db()
    assert (pair.status, pair.category, pair.distractors) == ("accepted", "existence", ["a cat", "a cup", "a hat"])
    assert response.json()["changes"]["category"] == {"old": "action", "new": "existence"}
    other = submitted(annotator, distractors=["sat down", "waved", "jumped"])
    passing(other)
    assert review(client_for(reviewer), other, distractors=["waved"]).status_code == 200
    other.refresh_from_db()
    assert other.distractors == ["waved"]


def test_a_correction_to_a_binary_category_says_which_image_with_the_editors_rules(client_for, annotator, reviewer):
    pair = submitted(annotator)
    passing(pair)
    client = client_for(reviewer)
    refused = review(client, pair, category="state", question="In which image is the door open wider?")
    assert refused.status_code == 400 and "exactly the options" in refused.json()["errors"]["answer"][0]
    done = review(
        client,
        pair,
        category="state",
        question=EXAMPLE_QUESTIONS["state"],
        answer="first image",
        distractors=["second image"],
    )
    assert done.status_code == 200
    pair.refresh_from_db()
    assert (pair.category, pair.answer, pair.distractors) == ("state", "first image", ["second image"])
    assert pair.question == EXAMPLE_QUESTIONS["state"]


def test_a_correction_to_temporal_takes_the_answer_from_the_timestamps(client_for, annotator, reviewer):
    pair = submitted(annotator)
    passing(pair)
    later = picking.pair_later_image(pair)
    assert later in ("first image", "second image")
    wrong = "first image" if later == "second image" else "second image"
    response = review(
        client_for(reviewer),
        pair,
        category="temporal",
        question=STANDARD_QUESTIONS["temporal"],
        answer=wrong,
        distractors=[later],
    )
    assert response.status_code == 200
    pair.refresh_from_db()
    assert (pair.category, pair.answer) == ("temporal", later)


def test_a_correction_is_refused_while_the_similarity_fails(client_for, annotator, reviewer):
    pair = submitted(annotator)
    Pair.objects.filter(pk=pair.pk).update(similarity=0.5, similarity_model=current_fingerprint())
    response = review(client_for(reviewer), pair, distractors=["waved"])
    assert response.status_code == 400 and "below the threshold" in response.json()["detail"]
    pair.refresh_from_db()
    assert (pair.status, pair.distractors) == ("submitted", ["sat down"])
