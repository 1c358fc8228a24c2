"""Caption pages and API: permissions of every view and endpoint, the flows through them, query bounds."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotator.captions import services as captions
from annotator.models import Caption, CaptionBatch, CaptionTask, Pair
from tests.factories import make_pair, make_video

pytestmark = pytest.mark.django_db

GOOD = "In the second image the red square has moved a little to the right."
SECRET_QUESTION = "Which image was taken later, honestly?"


@pytest.fixture
def world(annotator, annotator2, coordinator):
    """Two accepted pairs in a batch; bob has submitted a caption of the first, alice may lease the second."""
    video = make_video(frames=2)
    first, second = (make_pair(video=video, question=SECRET_QUESTION) for _ in range(2))
    batch = captions.caption_batch_create(
        created_by=coordinator, title="demo", selection="list", pair_ids=[first.pk, second.pk]
    )
    task = captions.caption_task_lease(user=annotator2)
    caption = captions.caption_submit(task_id=task.pk, user=annotator2, text=GOOD)
    return {"batch": batch, "caption": caption, "task": batch.tasks.get(pair=second), "pairs": (first, second)}


# (method, url name, kwargs key, role that may use it)
VIEWS = [
    ("get", "captions-home", None, "coordinator"),
    ("post", "caption-batch-create", None, "coordinator"),
    ("get", "captions-work", None, "annotator"),
    ("post", "caption-lease", None, "annotator"),
    ("get", "caption-workbench", "task", "annotator"),
    ("post", "caption-draft", "task", "annotator"),
    ("post", "caption-submit", "task", "annotator"),
    ("post", "caption-skip", "task", "annotator"),
    ("post", "caption-release", "task", "annotator"),
    ("get", "captions-review", None, "reviewer"),
    ("post", "caption-review", "caption", "reviewer"),
    ("post", "caption-choose", "caption", "reviewer"),
]
API = [
    ("get", "api-caption-batch-list", None, "coordinator"),
    ("post", "api-caption-batch-create", None, "coordinator"),
    ("post", "api-caption-task-lease", None, "annotator"),
    ("put", "api-caption-draft", "task", "annotator"),
    ("post", "api-caption-submit", "task", "annotator"),
    ("post", "api-caption-skip", "task", "annotator"),
    ("post", "api-caption-release", "task", "annotator"),
    ("get", "api-caption-review-queue", None, "reviewer"),
    ("post", "api-caption-review", "caption", "reviewer"),
    ("post", "api-caption-choose", "caption", "reviewer"),
]
# Someone logged in without the role each view needs (a coordinator counts as a reviewer).
WRONG_ROLE = {"coordinator": "reviewer", "annotator": "reviewer", "reviewer": "annotator"}


def url_of(world, name, key):
    if key == "task":
        return reverse(name, kwargs={"task_id": world["task"].pk})
    if key == "caption":
        return reverse(name, kwargs={"caption_id": world["caption"].pk})
    return reverse(name)


def user_for(role, request):
    return request.getfixturevalue(role)


@pytest.mark.parametrize(("method", "name", "key", "role"), VIEWS)
def test_every_page_sends_anonymous_users_to_login(client, world, method, name, key, role):
    response = getattr(client, method)(url_of(world, name, key))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize(("method", "name", "key", "role"), VIEWS)
def test_every_page_refuses_the_wrong_role(client_for, request, world, stranger, method, name, key, role):
    for user in (user_for(WRONG_ROLE[role], request), stranger):
        assert getattr(client_for(user), method)(url_of(world, name, key)).status_code == 403


@pytest.mark.parametrize(("method", "name", "key", "role"), VIEWS)
def test_every_page_refuses_the_wrong_method(client_for, request, world, method, name, key, role):
    client = client_for(user_for(role, request))
    url = url_of(world, name, key)
    if method == "get":
        assert client.post(url).status_code == 405
        return
    # A form's target: a GET (a reopened address) goes to the page with the form, not a blank 405.
    response = client.get(url)
    assert response.status_code == 302 and response["Location"] != url
    assert client.put(url).status_code == 405


@pytest.mark.parametrize(("method", "name", "key", "role"), API)
def test_every_endpoint_refuses_anonymous_callers(client, world, method, name, key, role):
    assert getattr(client, method)(url_of(world, name, key)).status_code in (401, 403)


@pytest.mark.parametrize(("method", "name", "key", "role"), API)
def test_every_endpoint_refuses_the_wrong_role(client_for, request, world, stranger, method, name, key, role):
    for user in (user_for(WRONG_ROLE[role], request), stranger):
        assert getattr(client_for(user), method)(url_of(world, name, key), {}).status_code == 403


@pytest.mark.parametrize(("method", "name", "key", "role"), API)
def test_every_endpoint_refuses_the_wrong_method(client_for, request, world, method, name, key, role):
    wrong = "delete"
    assert getattr(client_for(user_for(role, request)), wrong)(url_of(world, name, key)).status_code == 405


# --- Coordinator page --------------------------------------------------------------------------------------


def test_the_coordinator_creates_a_sample_batch_from_the_page(client_for, coordinator, world):
    response = client_for(coordinator).post(
        "/captions/batches/",
        {"title": "ten percent", "selection": "sample", "fraction": "0.5", "seed": "42", "captions_per_item": "2"},
    )
    assert response.status_code == 302
    batch = CaptionBatch.objects.get(title="ten percent")
    assert (batch.seed, batch.fraction, batch.captions_per_item) == (42, 0.5, 2)
    assert batch.tasks.count() == 2


def test_the_batch_form_names_a_bad_pair_id(client_for, coordinator, world):
    client = client_for(coordinator)
    refused = client.post("/captions/batches/", {"selection": "list", "pair_ids": "1, x7", "captions_per_item": "1"})
    assert refused.status_code == 302 and refused["Location"] == "/captions/"
    response = client.get(refused["Location"])
    assert "&#x27;x7&#x27; is not" in response.content.decode()
    assert "1, x7</textarea>" in response.content.decode(), "the form keeps what was sent"
    missing = client.get(
        client.post("/captions/batches/", {"selection": "list", "pair_ids": "999999", "captions_per_item": "1"})[
            "Location"
        ]
    )
    assert "Not accepted pairs (or no such pair): 999999." in missing.content.decode()
    assert CaptionBatch.objects.count() == 1


def test_the_coordinator_page_shows_progress_and_flag_rates(
    client_for, coordinator, world, django_assert_max_num_queries
):
    for i in range(3):
        captions.caption_batch_create(created_by=coordinator, title=f"more {i}", selection="all")
    client = client_for(coordinator)
    with django_assert_max_num_queries(12):
        response = client.get("/captions/")
    page = response.content.decode()
    assert "1/2" in page, "the first batch has one of two captions written"
    assert 'id="annotator-stats"' in page and "bob" in page


# --- Annotator pages ---------------------------------------------------------------------------------------


def test_an_annotator_leases_writes_and_submits_through_the_pages(client_for, annotator, world):
    client = client_for(annotator)
    assert "1</strong> caption task" in client.get("/captions/work/").content.decode()
    response = client.post("/captions/work/next/")
    task = world["task"]
    assert response["Location"] == f"/captions/tasks/{task.pk}/"
    page = client.get(response["Location"]).content.decode()
    pair = world["pairs"][1]
    assert pair.image_1.file.url in page and pair.image_2.file.url in page
    assert "Describe the second image relative to the first." in page
    assert SECRET_QUESTION not in page, "the question is hidden by default"
    draft = client.post(f"/captions/tasks/{task.pk}/draft/", {"text": "The red sq"})
    assert draft.status_code == 200 and "saved" in draft.json()
    assert "The red sq</textarea>" in client.get(f"/captions/tasks/{task.pk}/").content.decode(), "reload restores"
    assert client.get("/captions/work/")["Location"] == f"/captions/tasks/{task.pk}/", "the held task resumes"
    too_short = client.post(f"/captions/tasks/{task.pk}/submit/", {"text": "Red.", "client_key": "abc"})
    # Post/Redirect/Get: the workbench's own address shows the refusal and the text as sent, once.
    assert too_short.status_code == 302 and too_short["Location"] == f"/captions/tasks/{task.pk}/"
    shown = client.get(too_short["Location"]).content.decode()
    assert "write at least 20" in shown and "Red.</textarea>" in shown
    assert "write at least 20" not in client.get(too_short["Location"]).content.decode(), "a reload starts afresh"
    done = client.post(f"/captions/tasks/{task.pk}/submit/", {"text": GOOD, "client_key": "abc"})
    assert done.status_code == 302 and done["Location"] == "/captions/work/"
    again = client.post(f"/captions/tasks/{task.pk}/submit/", {"text": GOOD, "client_key": "abc"})
    assert again.status_code == 302
    assert Caption.objects.filter(author=annotator).values_list("status", "text").get() == ("submitted", GOOD)


def test_the_workbench_shows_the_question_when_the_batch_says_so(client_for, annotator, coordinator):
    pair = make_pair(question=SECRET_QUESTION)
    captions.caption_batch_create(
        created_by=coordinator, title="q", selection="list", pair_ids=[pair.pk], show_question=True
    )
    client = client_for(annotator)
    response = client.get(client.post("/captions/work/next/")["Location"])
    assert SECRET_QUESTION in response.content.decode()


def test_a_task_that_is_not_yours_sends_you_back_to_the_queue(client_for, annotator, annotator2, world):
    captions.caption_task_lease(user=annotator2)
    client = client_for(annotator)
    response = client.get(f"/captions/tasks/{world['task'].pk}/")
    assert response["Location"] == "/captions/work/"
    assert client.post(f"/captions/tasks/{world['task'].pk}/draft/", {"text": "x"}).status_code == 409


def test_the_workbench_script_gets_the_apis_error_body(client_for, annotator, annotator2, world):
    captions.caption_task_lease(user=annotator2)
    response = client_for(annotator).post(f"/captions/tasks/{world['task'].pk}/draft/", {"text": "x"})
    assert response.status_code == 409
    taken = (
        f"Caption task {world['task'].pk} is now leased to another annotator: your lease ran out and someone else "
        "took it. Your draft is saved; ask for work to get another caption task."
    )
    assert response.json() == {"detail": taken, "errors": {}}


def test_skipping_from_the_page_needs_a_reason(client_for, annotator, world):
    client = client_for(annotator)
    client.post("/captions/work/next/")
    task = world["task"]
    refused = client.post(f"/captions/tasks/{task.pk}/skip/", {"reason": ""})
    assert refused.status_code == 302 and refused["Location"] == f"/captions/tasks/{task.pk}/"
    assert not task.skips.exists()
    assert client.post(f"/captions/tasks/{task.pk}/skip/", {"reason": "blurred"}).status_code == 302
    assert task.skips.get().reason == "blurred"


def test_the_work_page_lists_your_captions_in_few_queries(client_for, annotator2, world, django_assert_max_num_queries):
    client = client_for(annotator2)
    with django_assert_max_num_queries(8):
        page = client.get("/captions/work/").content.decode()
    assert GOOD in page


# --- Review pages ------------------------------------------------------------------------------------------


def test_a_reviewer_accepts_from_the_page_and_it_becomes_the_export_caption(
    client_for, reviewer, world, django_assert_max_num_queries
):
    client = client_for(reviewer)
    with django_assert_max_num_queries(12):
        page = client.get("/captions/review/").content.decode()
    assert GOOD in page and 'href="/review/"' in page
    response = client.post(f"/captions/{world['caption'].pk}/review/", {"decision": "accept"})
    assert response.status_code == 302
    assert world["pairs"][0].chosen_caption.pk == world["caption"].pk
    assert "No captions are waiting" in client.get("/captions/review/").content.decode()


def test_the_author_does_not_see_their_caption_in_the_review_queue(client_for, coordinator, annotator2, world):
    Caption.objects.filter(pk=world["caption"].pk).update(author=coordinator)
    client = client_for(coordinator)
    assert "No captions are waiting" in client.get("/captions/review/").content.decode()
    assert client.post(f"/captions/{world['caption'].pk}/review/", {"decision": "accept"}).status_code == 403


def test_the_reviewer_switches_the_chosen_caption_from_the_page(client_for, reviewer, annotator, world):
    pair = world["pairs"][0]
    task = CaptionTask.objects.create(batch=world["batch"], pair=pair, slot=2)
    second = captions.caption_submit(task_id=task.pk, user=annotator, text="The square is further right now.")
    for caption in (world["caption"], second):
        captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision="accept")
    client = client_for(reviewer)
    assert "Use for export" in client.get("/captions/review/").content.decode()
    client.post(f"/captions/{second.pk}/choose/")
    assert pair.chosen_caption == second


# --- API ---------------------------------------------------------------------------------------------------


def test_the_api_runs_the_whole_caption_flow(client_for, annotator, reviewer, coordinator, world):
    api = client_for(annotator)
    leased = api.post("/api/captions/tasks/lease/")
    assert leased.status_code == 200
    body = leased.json()
    assert body["id"] == world["task"].pk and body["question"] is None and body["image_1"].startswith("http")
    task_url = f"/api/captions/tasks/{body['id']}"
    saved = api.put(f"{task_url}/draft/", {"text": "draft"}, content_type="application/json")
    assert saved.status_code == 200 and saved.json()["text"] == "draft"
    assert api.post("/api/captions/tasks/lease/").json()["draft"] == "draft"
    invalid = api.post(f"{task_url}/submit/", {"text": ""}, content_type="application/json")
    assert invalid.status_code == 400 and "empty" in invalid.json()["errors"]["text"][0]
    first = api.post(f"{task_url}/submit/", {"text": GOOD, "client_key": "k9"}, content_type="application/json")
    again = api.post(f"{task_url}/submit/", {"text": GOOD, "client_key": "k9"}, content_type="application/json")
    assert first.status_code == again.status_code == 201 and first.json()["id"] == again.json()["id"]
    assert api.post("/api/captions/tasks/lease/").status_code == 204
    late = api.post(f"{task_url}/submit/", {"text": GOOD}, content_type="application/json")
    assert late.status_code == 409

    review = client_for(reviewer)
    queue = review.get("/api/captions/review/").json()
    assert [c["id"] for c in queue] == [world["caption"].pk, first.json()["id"]]
    rejected = review.post(
        f"/api/captions/{first.json()['id']}/review/", {"decision": "reject"}, content_type="application/json"
    )
    assert rejected.status_code == 400 and "reason" in rejected.json()["errors"]
    accepted = review.post(
        f"/api/captions/{first.json()['id']}/review/", {"decision": "accept"}, content_type="application/json"
    )
    assert accepted.json()["status"] == "accepted" and accepted.json()["chosen"] is True
    chosen = review.post(f"/api/captions/{first.json()['id']}/choose/")
    assert chosen.status_code == 200

    batches = client_for(coordinator).get("/api/captions/batches/").json()
    assert batches[0]["tasks_done"] == 2 and batches[0]["captions_accepted"] == 1


def test_the_api_refuses_to_review_your_own_caption(client_for, annotator2, world):
    annotator2.groups.add(*type(annotator2.groups.first()).objects.filter(name="reviewer"))
    response = client_for(annotator2).post(
        f"/api/captions/{world['caption'].pk}/review/", {"decision": "accept"}, content_type="application/json"
    )
    assert response.status_code == 403


def test_the_api_creates_a_batch_and_names_bad_fields(client_for, coordinator, world):
    api = client_for(coordinator)
    created = api.post(
        "/api/captions/batches/create/",
        {"selection": "sample", "fraction": 0.5, "seed": 5, "captions_per_item": 2},
        content_type="application/json",
    )
    assert created.status_code == 201
    assert created.json()["seed"] == 5 and created.json()["tasks_total"] == 2
    assert len(created.json()["pair_ids"]) == 1
    bad = api.post(
        "/api/captions/batches/create/", {"selection": "list", "pair_ids": [999999]}, content_type="application/json"
    )
    assert bad.status_code == 400 and "999999" in bad.json()["errors"]["pair_ids"][0]
    assert Pair.objects.count() == 2


def test_the_home_page_links_the_caption_pages_by_role(client_for, coordinator, reviewer, annotator):
    assert 'href="/captions/"' in client_for(coordinator).get("/").content.decode()
    reviewer_home = client_for(reviewer).get("/").content.decode()
    assert 'href="/captions/review/"' in reviewer_home and 'href="/captions/"' not in reviewer_home
    assert 'href="/captions/review/"' not in client_for(annotator).get("/").content.decode()


def test_a_reviewer_rejects_with_a_reason_or_edits_from_the_page(client_for, reviewer, annotator, world):
    client = client_for(reviewer)
    caption = world["caption"]
    refused = client.post(f"/captions/{caption.pk}/review/", {"decision": "reject", "reason": ""}, follow=True)
    assert "Say why the caption is rejected" in refused.content.decode()
    caption.refresh_from_db()
    assert caption.status == "submitted"
    client.post(f"/captions/{caption.pk}/review/", {"decision": "edit", "text": "The red square moved right a bit."})
    caption.refresh_from_db()
    assert (caption.status, caption.text, caption.chosen) == ("accepted", "The red square moved right a bit.", True)
    assert caption.reviews.get().original_text == GOOD


# --- Stop and release, skip and stop (issue 26) ------------------------------------------------------------


def test_stop_and_release_keeps_the_text_on_screen_as_the_draft_and_opens_the_work_page(client_for, annotator, world):
    client = client_for(annotator)
    task = captions.caption_task_lease(user=annotator)
    captions.caption_draft_save(task_id=task.pk, user=annotator, text="The square moved")
    response = client.post(reverse("caption-release", kwargs={"task_id": task.pk}), {"text": "The square moved left"})
    assert response.status_code == 302 and response["Location"] == reverse("captions-work")
    task.refresh_from_db()
    assert task.lease_holder_id is None and task.status == CaptionTask.Status.OPEN
    assert Caption.objects.get(task=task, author=annotator).text == "The square moved left"
    # The work page no longer sends the annotator back to a held task: it shows the queue.
    page = client.get(reverse("captions-work"))
    assert page.status_code == 200 and b"Start captioning" in page.content
    # Taking the task again restores the draft.
    assert captions.caption_task_lease(user=annotator).pk == task.pk
    assert captions.caption_draft_of(task, annotator).text == "The square moved left"


def test_releasing_a_task_someone_else_holds_changes_nothing(client_for, annotator, annotator2, world):
    task = captions.caption_task_lease(user=annotator)
    response = client_for(annotator2).post(f"/api/captions/tasks/{task.pk}/release/", {"text": "mine now"})
    assert response.status_code == 409 and "You do not hold caption task" in response.json()["detail"]
    task.refresh_from_db()
    assert task.lease_holder_id == annotator.pk
    assert not Caption.objects.filter(task=task, author=annotator2).exists()


def test_skip_and_stop_goes_to_the_work_page_where_the_skip_is_undone(client_for, annotator, world):
    client = client_for(annotator)
    task = captions.caption_task_lease(user=annotator)
    url = reverse("caption-skip", kwargs={"task_id": task.pk})
    response = client.post(url, {"reason": "No visible difference", "then": "stop"})
    assert response.status_code == 302 and response["Location"] == reverse("captions-work")
    assert CaptionTask.objects.held_by(annotator).count() == 0  # nothing else was leased
    page = client.get(reverse("captions-work")).content.decode()
    skip = task.skips.get()
    assert f"/captions/skips/{skip.pk}/undo/" in page
    client.post(f"/captions/skips/{skip.pk}/undo/")
    assert captions.caption_task_lease(user=annotator).pk == task.pk
