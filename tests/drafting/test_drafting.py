"""Models that draft, people who decide (annotator/drafting), against the local model server on loopback
(tests/model_server.py): a draft asked for and stored with its prompt, an unusable or late reply refused with why, the
pair recording its draft and what the person changed, "k of n models wrong" from the background answerers, the switches
per endpoint, the /stats/ figures on a worked set, and the API and the settings form by role."""

from __future__ import annotations

import uuid
from fractions import Fraction

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import default_storage

from annotator.collections import authoring
from annotator.collections.services import collection_import
from annotator.drafting import services as drafting
from annotator.llm.client import REDACTED
from annotator.llm.endpoints import endpoint_create
from annotator.models import ModelDraft, ModelEndpoint, Pair, PairCandidate
from annotator.picking import services as picking
from annotator.picking.drafted import background_answerers, drafters
from annotator.picking.services import VideoSource
from annotator.stats.drafting import drafting_figures
from benchmark.intervals import Scored, accuracy_interval, micro_mean
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound, Unavailable
from tests.collection_fixtures import levir_folder
from tests.factories import make_pair, make_video
from tests.model_server import ModelServer
from tests.modeleval_fixtures import bind_key


@pytest.fixture
def server():
    server = ModelServer().start()
    yield server
    server.stop()


def register(coordinator, server, name="drafter", **fields) -> ModelEndpoint:
    values = {"name": name, "base_url": server.base_url, "model_id": "tiny-vlm", "timeout_s": 5}
    return endpoint_create(user=coordinator, **{**values, **fields})


@pytest.fixture
def drafter(db, coordinator, server) -> ModelEndpoint:
    endpoint = register(coordinator, server)
    drafting.drafting_settings_update(user=coordinator, drafting=[endpoint.pk], default=endpoint.pk, background=[])
    return endpoint


@pytest.fixture
def held(db, annotator):
    video = make_video(frames=4)
    picking.video_heartbeat(video=video, user=annotator)
    return video


def frame_bytes(video, index: int) -> bytes:
    with default_storage.open(video.frames.get(index=index).image.file.name, "rb") as handle:
        return handle.read()


def submit(annotator, video, draft: ModelDraft | None, **fields) -> Pair:
    values = {
        "index_a": 0,
        "index_b": 2,
        "category": "attribute",
        "question": "What changed about the mug (attribute)?",
        "answer": "it turned red",
        "distractors": ["it turned blue", "it got bigger"],
        "client_key": uuid.uuid4().hex,
        "model_draft": draft.pk if draft else None,
    }
    pair, _ = picking.pair_submit(user=annotator, video=video, **{**values, **fields})
    pair.refresh_from_db()
    return pair


def test_it_drafts_with_the_default_drafter_and_stores_the_draft_with_its_prompt(annotator, held, drafter, server):
    draft = drafting.model_draft_request(
        user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
    )
    assert (draft.question, draft.answer) == ("What changed about the mug (attribute)?", "it turned red")
    assert draft.distractors == ["it turned blue", "it got bigger"]  # the answer the model repeated is dropped
    assert (draft.endpoint_id, draft.endpoint_name, draft.model_id) == (drafter.pk, "drafter", "tiny-vlm")
    assert draft.prompt["user"].startswith("Category: attribute") and "JSON" in draft.prompt["system"]
    assert "```json" in draft.response_text and draft.failure == ""
    (seen,) = server.requests
    assert seen.draft_category == "attribute"
    # Frame A goes first, frame B second: "first image" in a draft means frame A.
    assert [ModelServer.image_bytes(url) for url in seen.images] == [frame_bytes(held, 0), frame_bytes(held, 2)]
    assert ModelDraft.objects.get().pk == draft.pk


def test_a_binary_draft_names_the_answer_frame(annotator, held, drafter):
    draft = drafting.model_draft_request(
        user=annotator, source=VideoSource(held), category="state", index_a=1, index_b=3
    )
    assert (draft.answer, draft.distractors, draft.answer_frame) == ("second image", ["first image"], "b")


def test_an_unusable_reply_is_refused_with_why_and_kept_on_record(annotator, held, drafter, server):
    server.draft_reply = lambda category: "The mug looks redder, I think."
    with pytest.raises(Unavailable) as refused:
        drafting.model_draft_request(
            user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
        )
    assert "drafter: the model's reply holds no JSON object: 'The mug looks redder, I think.'" in str(refused.value)
    stored = ModelDraft.objects.get()
    assert stored.question == "" and "holds no JSON object" in stored.failure
    assert stored.response_text == "The mug looks redder, I think."


def test_an_endpoint_that_echoes_its_key_shows_it_to_nobody(
    annotator, coordinator, held, server, monkeypatch, client_for, caplog, settings
):
    """A drafter that quotes its key back, in an unusable reply: the refusal the annotator reads, the stored draft, the
    API's answer and the log hold the key nowhere (annotator.llm.client.redact, the one redaction)."""
    key = "sk-drafting-echo-7c1e9a3b5d2f4e6a"
    variable = "SUBTLEBENCH_MODEL_KEY_DRAFTING_ECHO"
    monkeypatch.setenv(variable, key)
    bind_key(settings, variable, server.base_url)
    endpoint = register(coordinator, server, name="echoer", api_key_env=variable)
    drafting.drafting_settings_update(user=coordinator, drafting=[endpoint.pk], default=endpoint.pk, background=[])
    server.draft_reply = lambda category: f"Your header was Bearer {key}; no draft today."
    with pytest.raises(Unavailable) as refused:
        drafting.model_draft_request(
            user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
        )
    assert {seen.authorization for seen in server.requests} == {f"Bearer {key}"}  # the key was sent
    assert key not in str(refused.value) and REDACTED in str(refused.value)
    stored = ModelDraft.objects.get()
    assert key not in stored.failure and key not in stored.response_text and REDACTED in stored.response_text
    answer = client_for(annotator).post(
        f"/api/videos/{held.pk}/model-draft/",
        {"category": "attribute", "index_a": 0, "index_b": 2},
        content_type="application/json",
    )
    assert answer.status_code == 503 and key not in answer.content.decode()
    assert key not in caplog.text


def test_a_model_past_the_deadline_gives_no_draft(annotator, held, drafter, server, settings):
    settings.MODEL_DRAFT_TIMEOUT_SECONDS = 1
    server.hang_seconds = 3
    server.faults["draft:attribute"] = "timeout"
    with pytest.raises(Unavailable, match="no answer from the endpoint within 1 s"):
        drafting.model_draft_request(
            user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
        )


def test_who_may_ask_and_which_model(annotator, annotator2, coordinator, held, server):
    other = register(coordinator, server, name="not-a-drafter")
    with pytest.raises(Conflict, match="No model may draft questions"):
        drafting.model_draft_request(
            user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
        )
    drafting.drafting_settings_update(user=coordinator, drafting=[other.pk], default=None, background=[])
    with pytest.raises(Conflict, match=f"You do not hold video {held.yt8m_id}"):
        drafting.model_draft_request(
            user=annotator2, source=VideoSource(held), category="attribute", index_a=0, index_b=2
        )
    with pytest.raises(NotFound):
        drafting.model_draft_request(
            user=annotator,
            source=VideoSource(held),
            category="attribute",
            index_a=0,
            index_b=2,
            endpoint_id=other.pk + 99,
        )
    with pytest.raises(Invalid, match="Pick a category"):
        drafting.model_draft_request(user=annotator, source=VideoSource(held), category="", index_a=0, index_b=2)
    assert server.requests == []


def test_the_pair_records_its_draft_and_what_the_person_changed(annotator, held, drafter):
    draft = drafting.model_draft_request(
        user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
    )
    pair = submit(annotator, held, draft, question="What changed about the red mug?")
    assert pair.drafted_by_id == draft.pk
    assert {name: entry["change"] for name, entry in pair.draft_changes.items()} == {
        "question": "edited",
        "answer": "unchanged",
        "distractors": "unchanged",
    }
    assert pair.draft_changes["question"]["drafted"] == "What changed about the mug (attribute)?"
    # A new version sent without the draft keeps it, measured against the new texts.
    again = submit(annotator, held, None, pair_id=pair.pk, version=pair.version, answer="a cat walked in")
    assert again.drafted_by_id == draft.pk and again.draft_changes["answer"]["change"] == "replaced"
    hand = submit(annotator, held, None, index_b=3)
    assert hand.drafted_by_id is None and hand.draft_changes == {}


def test_a_binary_pair_compares_the_answer_frame_whatever_order_the_app_chose(annotator, held, drafter):
    draft = drafting.model_draft_request(
        user=annotator, source=VideoSource(held), category="state", index_a=1, index_b=3
    )
    pair = submit(
        annotator, held, draft, category="state", index_a=1, index_b=3, question=draft.question, answer_frame="a"
    )
    assert pair.draft_changes["answer"] == {"change": "replaced", "drafted": "frame B", "submitted": "frame A"}
    assert pair.draft_changes["question"]["change"] == "unchanged"


def test_another_annotators_draft_cannot_be_claimed(annotator, annotator2, held, drafter):
    draft = drafting.model_draft_request(
        user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
    )
    video = make_video(frames=3)
    picking.video_heartbeat(video=video, user=annotator2)
    with pytest.raises(Invalid, match=f"Draft {draft.pk} is not a draft of yours"):
        submit(annotator2, video, draft)
    assert not Pair.objects.exists()


def test_background_answers_say_k_of_n_models_wrong(annotator, coordinator, held, server):
    def right(question, options):
        return "it turned red"

    def wrong(question, options):
        return "it got bigger"

    knows, guesses = ModelServer(policy=right).start(), ModelServer(policy=wrong).start()
    down = ModelServer().start()
    down.stop()
    try:
        endpoints = [
            register(coordinator, knows, name="a-right"),
            register(coordinator, guesses, name="b-wrong"),
            register(coordinator, down, name="c-down"),
        ]
        quiet = register(coordinator, server, name="d-not-asked")
        background = [e.pk for e in endpoints]
        drafting.drafting_settings_update(user=coordinator, drafting=[], default=None, background=background)
        answers = drafting.draft_answers(
            user=annotator,
            source=VideoSource(held),
            category="attribute",
            index_a=0,
            index_b=2,
            question="What changed about the mug?",
            answer="it turned red",
            distractors=["it turned blue", "it got bigger", ""],
        )
    finally:
        knows.stop()
        guesses.stop()
    assert (answers["asked"], answers["answered"], answers["wrong"], answers["failed"]) == (3, 2, 1, 1)
    assert [(m["name"], m["verdict"], m["chose"]) for m in answers["models"]] == [
        ("a-right", "right", "it turned red"),
        ("b-wrong", "wrong", "it got bigger"),
        ("c-down", "failed", ""),
    ]
    assert answers["models"][2]["message"] == "could not reach the endpoint"
    (seen,) = knows.requests
    assert seen.question == "What changed about the mug?"
    assert sorted(seen.options) == ["it got bigger", "it turned blue", "it turned red"]
    assert server.sent("What changed about the mug?") == 0 and quiet.answers_drafts is False


def test_background_answers_of_a_binary_question_follow_the_answer_frame(annotator, coordinator, held):
    def first(question, options):
        return "first image"

    answerer = ModelServer(policy=first).start()
    try:
        endpoint = register(coordinator, answerer, name="first-always")
        drafting.drafting_settings_update(user=coordinator, drafting=[], default=None, background=[endpoint.pk])
        ask = {
            "user": annotator,
            "source": VideoSource(held),
            "category": "state",
            "index_a": 0,
            "index_b": 2,
            "question": "Open?",
        }
        assert drafting.draft_answers(**ask, answer_frame="a")["wrong"] == 0
        assert drafting.draft_answers(**ask, answer_frame="b")["wrong"] == 1
        with pytest.raises(Invalid, match="Say which frame is the answer"):
            drafting.draft_answers(**ask)
    finally:
        answerer.stop()


def test_no_background_answerer_asks_nobody(annotator, held, drafter, server):
    answers = drafting.draft_answers(
        user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2, question="Q?", answer="x"
    )
    assert answers == {"asked": 0, "answered": 0, "wrong": 0, "failed": 0, "models": []}
    assert server.requests == []


def test_the_switches_are_off_by_default_and_set_by_a_coordinator_only(coordinator, annotator, server):
    first, second = register(coordinator, server, name="one"), register(coordinator, server, name="two")
    assert not any([first.drafts_questions, first.default_drafter, first.answers_drafts])
    with pytest.raises(Invalid, match="default drafter must be one of the models that may draft"):
        drafting.drafting_settings_update(user=coordinator, drafting=[first.pk], default=second.pk, background=[])
    with pytest.raises(Forbidden):
        drafting.drafting_settings_update(user=annotator, drafting=[first.pk], default=None, background=[])
    with pytest.raises(Invalid, match="No model endpoint has the id 999999"):
        drafting.drafting_settings_update(user=coordinator, drafting=[999999], default=None, background=[])
    drafting.drafting_settings_update(
        user=coordinator, drafting=[first.pk, second.pk], default=second.pk, background=[first.pk]
    )
    assert [e.name for e in drafters()] == ["two", "one"]  # the default first
    assert [e.name for e in background_answerers()] == ["one"]
    drafting.drafting_settings_update(user=coordinator, drafting=[first.pk], default=first.pk, background=[])
    assert list(ModelEndpoint.objects.filter(default_drafter=True).values_list("name", flat=True)) == ["one"]


def test_stats_compare_drafted_with_hand_written_pairs_on_a_worked_set(annotator, coordinator, server):
    endpoint = register(coordinator, server)
    videos = [make_video(frames=2) for _ in range(4)]

    def drafted(video, status, changes):
        draft = ModelDraft.objects.create(
            author=annotator, video=video, endpoint=endpoint, endpoint_name="drafter", model_id="m",
            category="temporal", index_a=0, index_b=1,
        )  # fmt: skip
        return make_pair(status=status, author=annotator, video=video, drafted_by=draft, draft_changes=changes)

    same = {
        "question": {"change": "unchanged"},
        "answer": {"change": "unchanged"},
        "distractors": {"change": "unchanged"},
    }
    edited = {**same, "question": {"change": "edited"}}
    replaced = {**same, "answer": {"change": "replaced"}, "question": {"change": "edited"}}
    # Drafted: 3 accepted of 4 decided, on three videos; one more submitted (not decided).
    drafted(videos[0], Pair.Status.ACCEPTED, same)
    drafted(videos[0], Pair.Status.ACCEPTED, edited)
    drafted(videos[1], Pair.Status.REJECTED, replaced)
    drafted(videos[2], Pair.Status.ACCEPTED, same)
    drafted(videos[3], Pair.Status.SUBMITTED, edited)
    ModelDraft.objects.create(
        author=annotator, video=videos[3], endpoint_name="drafter", model_id="m", category="state",
        index_a=0, index_b=1, failure="drafter: the model's reply is empty",
    )  # fmt: skip
    # Hand-written: 1 accepted of 2 decided; a withdrawn and an imported pair (no video) are not counted.
    make_pair(status=Pair.Status.ACCEPTED, author=annotator, video=videos[1])
    make_pair(status=Pair.Status.REJECTED, author=annotator, video=videos[2])
    make_pair(status=Pair.Status.WITHDRAWN, author=annotator, video=videos[3])
    make_pair(status=Pair.Status.ACCEPTED, author=None)

    figures = drafting_figures()
    by_video = [(videos[0].pk, 1), (videos[0].pk, 1), (videos[1].pk, 0), (videos[2].pk, 1)]
    expected = accuracy_interval(micro_mean(Scored(Fraction(v), ("video", c)) for c, v in by_video), answers=4)
    assert figures["drafted"] == {"decided": 4, "accepted": 3, "rate": 0.75, "low": expected[0], "high": expected[1]}
    assert figures["drafted"]["low"] < 0.75 < figures["drafted"]["high"]
    assert (figures["hand"]["decided"], figures["hand"]["accepted"], figures["hand"]["rate"]) == (2, 1, 0.5)
    assert figures["submitted_drafted"] == 5 and figures["as_drafted"] == 2
    assert figures["fields"] == {
        "question": {"edited": 3, "replaced": 0},
        "answer": {"edited": 0, "replaced": 1},
        "distractors": {"edited": 0, "replaced": 0},
    }
    assert figures["requests"] == {"all": 6, "failed": 1, "used": 5}


# --- A candidate pair of a collection ---------------------------------------------------------------------------


@pytest.fixture
def candidate(db, annotator, tmp_path):
    """train_1 of a LEVIR-CD-shaped collection, held by the annotator."""
    collection_import(source=str(levir_folder(tmp_path / "levir")), name="levir_cd", domain="aerial", sync=True)
    candidate = PairCandidate.objects.get(source_id="train_1")
    authoring.candidate_heartbeat(candidate=candidate, user=annotator)
    return candidate


def image_bytes(image) -> bytes:
    with default_storage.open(image.file.name, "rb") as handle:
        return handle.read()


def test_a_candidate_pair_is_drafted_from_its_two_images_and_its_pair_records_the_draft(
    client_for, annotator, annotator2, candidate, held, drafter, server
):
    client = client_for(annotator)
    url = f"/api/candidates/{candidate.pk}/model-draft/"
    made = client.post(url, {"category": "existence", "index_a": 0, "index_b": 1}, content_type="application/json")
    assert made.status_code == 201, made.content
    draft = ModelDraft.objects.get(pk=made.json()["id"])
    assert (draft.candidate, draft.video, draft.index_a, draft.index_b) == (candidate, None, 0, 1)
    (seen,) = server.requests
    images = [ModelServer.image_bytes(url) for url in seen.images]
    assert images == [image_bytes(candidate.image_1), image_bytes(candidate.image_2)]  # A is image 1, B image 2
    # A draft asked on a video is not this pair's draft; another annotator holds nothing here to ask a model about.
    on_video = drafting.model_draft_request(
        user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
    )
    texts = {"category": "existence", "question": "Which roof appeared?", "answer": "a roof", "distractors": ["a car"]}
    with pytest.raises(Invalid, match=f"Draft {on_video.pk} is not a draft of yours on these images"):
        authoring.candidate_submit(
            user=annotator, candidate=candidate, client_key=uuid.uuid4().hex, model_draft=on_video.pk, **texts
        )
    refused = client_for(annotator2).post(
        url, {"category": "existence", "index_a": 0, "index_b": 1}, content_type="application/json"
    )
    assert (
        refused.status_code == 409 and f"You do not hold candidate pair {candidate.title}" in refused.json()["detail"]
    )
    pair, _ = authoring.candidate_submit(
        user=annotator, candidate=candidate, client_key=uuid.uuid4().hex, model_draft=draft.pk, **texts
    )
    assert pair.drafted_by == draft
    assert {name: entry["change"] for name, entry in pair.draft_changes.items()} == {
        "question": "replaced",
        "answer": "replaced",
        "distractors": "replaced",
    }
    figures = drafting_figures()  # /stats/ counts a pair authored from a candidate as one made in the editor
    assert (figures["submitted_drafted"], figures["fields"]["question"]["replaced"]) == (1, 1)


def test_background_answers_on_a_candidate_pair_see_its_images(client_for, annotator, coordinator, candidate):
    answerer = ModelServer().start()
    try:
        endpoint = register(coordinator, answerer, name="answers")
        drafting.drafting_settings_update(user=coordinator, drafting=[], default=None, background=[endpoint.pk])
        body = {"category": "quantity", "index_a": 0, "index_b": 1, "question": "More roofs?", "answer_frame": "b"}
        response = client_for(annotator).post(
            f"/api/candidates/{candidate.pk}/model-draft/answers/", body, content_type="application/json"
        )
    finally:
        answerer.stop()
    assert response.status_code == 200, response.content
    assert (response.json()["asked"], response.json()["answered"]) == (1, 1)
    (seen,) = answerer.requests
    assert [ModelServer.image_bytes(url) for url in seen.images] == [
        image_bytes(candidate.image_1),
        image_bytes(candidate.image_2),
    ]


# --- The API and the settings form ----------------------------------------------------------------------------


def test_the_draft_api_answers_201_with_the_draft_and_503_with_why(client_for, annotator, held, drafter, server):
    client = client_for(annotator)
    url = f"/api/videos/{held.pk}/model-draft/"
    body = {"category": "attribute", "index_a": 0, "index_b": 2}
    made = client.post(url, body, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["question"] == "What changed about the mug (attribute)?"
    assert made.json()["endpoint_name"] == "drafter" and "prompt" not in made.json()
    server.draft_reply = lambda category: '{"question": "Q?"}'
    refused = client.post(url, body, content_type="application/json")
    assert refused.status_code == 503
    assert 'has no "answer" text' in refused.json()["detail"]


def test_the_draft_api_by_role_and_method(client, client_for, reviewer, annotator, held, drafter, server):
    url = f"/api/videos/{held.pk}/model-draft/"
    body = {"category": "attribute", "index_a": 0, "index_b": 2}
    assert client.post(url, body, content_type="application/json").status_code in (401, 403)
    assert client_for(reviewer).post(url, body, content_type="application/json").status_code == 403
    assert client_for(annotator).get(url).status_code == 405
    answers = f"/api/videos/{held.pk}/model-draft/answers/"
    assert client_for(reviewer).post(answers, {}, content_type="application/json").status_code == 403
    assert client_for(annotator).get(answers).status_code == 405
    assert server.requests == []


def test_the_submit_api_returns_the_draft_it_came_from(client_for, annotator, held, drafter):
    client = client_for(annotator)
    draft = client.post(
        f"/api/videos/{held.pk}/model-draft/",
        {"category": "attribute", "index_a": 0, "index_b": 2},
        content_type="application/json",
    ).json()
    body = {
        "video": held.pk,
        "index_a": 0,
        "index_b": 2,
        "category": "attribute",
        "question": draft["question"],
        "answer": "it turned scarlet red",
        "distractors": draft["distractors"],
        "client_key": uuid.uuid4().hex,
        "model_draft": draft["id"],
    }
    response = client.post("/api/pairs/submit/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["drafted_by"] == draft["id"]
    assert response.json()["draft_changes"]["answer"]["change"] == "edited"


def test_the_settings_form_is_for_coordinators(client, client_for, coordinator, annotator, server):
    endpoint = register(coordinator, server)
    url = "/models/drafting/"
    form = {"drafting": [str(endpoint.pk)], "default": str(endpoint.pk), "background": [str(endpoint.pk)]}
    assert client_for(annotator).post(url, form).status_code == 403
    client.logout()
    anonymous = client.post(url, form)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    coordinator_client = client_for(coordinator)
    assert coordinator_client.get(url).status_code == 302  # the page with the form
    assert coordinator_client.put(url).status_code == 405
    endpoint.refresh_from_db()
    assert not endpoint.drafts_questions
    saved = coordinator_client.post(url, form)
    assert saved.status_code == 302 and saved["Location"] == "/models/"
    endpoint.refresh_from_db()
    assert endpoint.drafts_questions and endpoint.default_drafter and endpoint.answers_drafts
    page = coordinator_client.get("/models/")
    assert (
        b'id="drafting-settings"' in page.content and b'name="default" value="%d" checked' % endpoint.pk in page.content
    )
    refused = coordinator_client.post(url, {"default": str(endpoint.pk)}, follow=True)
    assert b"The default drafter must be one of the models that may draft." in refused.content


def test_the_review_page_and_the_data_manager_show_which_pairs_were_drafted(
    client_for, annotator, reviewer, held, drafter
):
    draft = drafting.model_draft_request(
        user=annotator, source=VideoSource(held), category="attribute", index_a=0, index_b=2
    )
    drafted = submit(annotator, held, draft, question="What changed about the red mug?")
    hand = submit(annotator, held, None, index_b=3, question="Which mug changed colour?")
    client = client_for(reviewer)
    page = client.get(f"/review/pairs/{drafted.pk}/").content.decode()
    assert "Model-drafted" in page and "by drafter" in page
    assert 'data-field="question"' in page and "What changed about the mug (attribute)?" in page
    assert 'id="draft-record"' not in client.get(f"/review/pairs/{hand.pk}/").content.decode()
    only_drafted = client.get("/tables/pairs/?drafted=yes").content.decode()
    assert "What changed about the red mug?" in only_drafted and "Which mug changed colour?" not in only_drafted
    only_hand = client.get("/tables/pairs/?drafted=no").content.decode()
    assert "Which mug changed colour?" in only_hand and "What changed about the red mug?" not in only_hand


def test_a_prompt_file_replaces_our_texts_and_the_draft_records_what_was_sent(
    annotator, held, drafter, server, settings, tmp_path
):
    prompt = tmp_path / "drafting.json"
    prompt.write_text('{"system": "Be terse.", "user": "Category: {category}. Options: {options} JSON only."}')
    settings.MODEL_DRAFT_PROMPT_FILE = str(prompt)
    draft = drafting.model_draft_request(
        user=annotator, source=VideoSource(held), category="quality", index_a=0, index_b=1
    )
    sent = 'Category: quality. Options: exactly "first image" and "second image": the answer is one of them and the '
    sent += "only distractor is the other. JSON only."
    assert draft.prompt == {"system": "Be terse.", "user": sent}
    (seen,) = server.requests
    assert (seen.system, seen.text) == ("Be terse.", sent)
    prompt.write_text('{"user": "no category here"}')
    with pytest.raises(ImproperlyConfigured, match="MODEL_DRAFT_PROMPT_FILE .*drafting.json: the user template lacks"):
        drafting.model_draft_request(user=annotator, source=VideoSource(held), category="quality", index_a=0, index_b=1)
