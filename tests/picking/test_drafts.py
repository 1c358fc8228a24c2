"""Two tabs, one annotator (issue 17): autosaved pair drafts carry the version they were based on, as submits do.

A save from a tab that did not see the latest draft is refused (409) and writes nothing; a submit deletes only the
draft it came from.
"""

from __future__ import annotations

import pytest

from annotator.authoring.drafts import DraftChanged, work_draft_save
from annotator.models import PairDraft
from annotator.picking import services as picking
from tests.picking.test_picking import bulk_video, run_at_once, submit

pytestmark = pytest.mark.django_db


def put_draft(client, video, state, version):
    body = {"state": state} if version is ... else {"state": state, "version": version}
    return client.put(f"/api/videos/{video.pk}/draft/", body, content_type="application/json")


def test_each_save_answers_the_version_the_next_save_is_based_on(client_for, annotator):
    video = bulk_video(3)
    client = client_for(annotator)
    first = put_draft(client, video, {"question": "one"}, 0)
    assert first.status_code == 200
    second = put_draft(client, video, {"question": "two"}, first.json()["version"])
    assert second.status_code == 200
    assert second.json()["version"] > first.json()["version"] > 0
    assert client.get(f"/api/videos/{video.pk}/draft/").json() == {
        "state": {"question": "two"},
        "version": second.json()["version"],
        "updated": second.json()["updated"],
    }


def test_a_save_from_a_stale_tab_is_refused_and_writes_nothing(client_for, annotator):
    video = bulk_video(3)
    client = client_for(annotator)
    opened = put_draft(client, video, {"question": "both tabs saw this"}, 0).json()["version"]
    newer = put_draft(client, video, {"question": "tab one typed on"}, opened).json()["version"]

    stale = put_draft(client, video, {"question": "tab two, older"}, opened)

    assert stale.status_code == 409
    assert stale.json() == {
        "detail": "The draft changed in another tab since this one last saved it: load the newer draft, or keep "
        "this tab's and save it over.",
        "errors": {"version": [f"The saved draft is version {newer}."]},
    }
    draft = PairDraft.objects.get()
    assert (draft.state, draft.version) == ({"question": "tab one typed on"}, newer)
    # Keeping the stale tab's text: it saves over the version it was told about.
    kept = put_draft(client, video, {"question": "tab two, older"}, newer)
    assert kept.status_code == 200
    assert PairDraft.objects.get().state == {"question": "tab two, older"}


def test_two_tabs_that_both_start_from_no_draft_do_not_both_win(annotator):
    video = bulk_video(3)
    work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "first tab"}, version=0)
    with pytest.raises(DraftChanged):
        work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "second tab"}, version=0)
    assert PairDraft.objects.get().state == {"question": "first tab"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("base", ["no draft yet", "one draft"])
def test_two_tabs_saving_at_the_same_moment_from_one_version_leave_one_winner(annotator, base):
    video = bulk_video(3)
    seen = 0
    if base == "one draft":
        seen = work_draft_save(
            picking.VIDEOS, item=video, user=annotator, state={"question": "start"}, version=0
        ).version

    def save(text):
        return lambda: work_draft_save(
            picking.VIDEOS, item=video, user=annotator, state={"question": text}, version=seen
        )

    results = run_at_once(save("tab one"), save("tab two"))
    winners = [result for result in results if isinstance(result, PairDraft)]
    assert len(winners) == 1 and sum(isinstance(result, DraftChanged) for result in results) == 1, results
    assert PairDraft.objects.get().state == winners[0].state


def test_a_save_without_a_version_still_replaces_the_draft(client_for, annotator):
    video = bulk_video(3)
    client = client_for(annotator)
    put_draft(client, video, {"question": "one"}, 0)
    assert put_draft(client, video, {"question": "older client"}, ...).status_code == 200
    assert PairDraft.objects.get().state == {"question": "older client"}


def test_a_submit_deletes_its_own_draft_and_keeps_a_newer_one_from_another_tab(client_for, annotator):
    video = bulk_video(5)
    picking.video_lease_next(user=annotator)
    seen = work_draft_save(
        picking.VIDEOS, item=video, user=annotator, state={"question": "this tab"}, version=0
    ).version
    submit(annotator, video, draft_version=seen)
    assert not PairDraft.objects.exists()

    seen = work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "tab one"}, version=0).version
    work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "tab two, newer"}, version=seen)
    submit(annotator, video, draft_version=seen, a=1, b=2)
    assert PairDraft.objects.get().state == {"question": "tab two, newer"}


def test_a_tab_that_saw_a_draft_before_a_submit_cannot_overwrite_the_next_draft(annotator):
    video = bulk_video(5)
    picking.video_lease_next(user=annotator)
    stale = work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "old"}, version=0).version
    submit(annotator, video, draft_version=stale)  # deletes the draft
    fresh = work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "new pair"}, version=0)
    assert fresh.version != stale
    with pytest.raises(DraftChanged):
        work_draft_save(picking.VIDEOS, item=video, user=annotator, state={"question": "old"}, version=stale)
    assert PairDraft.objects.get().state == {"question": "new pair"}


def test_the_submit_answer_says_the_draft_version_now(client_for, annotator):
    video = bulk_video(5)
    client = client_for(annotator)
    picking.video_lease_next(user=annotator)
    version = put_draft(client, video, {"question": "q"}, 0).json()["version"]
    body = {
        "video": video.pk,
        "index_a": 0,
        "index_b": 1,
        "category": "action",
        "question": "What did the cyclist do between the two images?",
        "answer": "raised a hand",
        "distractors": ["sat down"],
        "client_key": "k" * 16,
        "draft_version": version,
    }
    response = client.post("/api/pairs/submit/", body, content_type="application/json")
    assert response.status_code == 201, response.json()
    assert response.json()["draft_version"] == 0  # deleted: the next save starts from no draft
    assert put_draft(client, video, {"question": "next"}, 0).status_code == 200


# --- Caption drafts: the same versioning ---------------------------------------------------------------------


def leased_caption_task(annotator, coordinator):
    from annotator.captions import services as captions
    from tests.factories import make_pair, make_video

    pair = make_pair(video=make_video(frames=2))
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[pair.pk])
    return captions.caption_task_lease(user=annotator)


def test_a_caption_draft_from_a_stale_tab_is_refused_and_writes_nothing(client_for, annotator, coordinator):
    from annotator.models import Caption

    task = leased_caption_task(annotator, coordinator)
    client = client_for(annotator)
    url = f"/captions/tasks/{task.pk}/draft/"
    opened = client.post(url, {"text": "The red square moved", "version": 0}).json()["version"]
    newer = client.post(url, {"text": "The red square moved to the right", "version": opened}).json()["version"]

    stale = client.post(url, {"text": "The lamp is off", "version": opened})
    assert stale.status_code == 409
    assert stale.json()["errors"] == {"version": [f"The saved draft is version {newer}."]}
    assert Caption.objects.get(task=task).text == "The red square moved to the right"
    # The page a reload shows carries the version the next save is based on.
    page = client.get(f"/captions/tasks/{task.pk}/")
    assert f'data-draft-version="{newer}"'.encode() in page.content
    # "Keep this tab's": a save without a version writes over, knowingly.
    assert client.post(url, {"text": "The lamp is off"}).status_code == 200
    assert Caption.objects.get(task=task).text == "The lamp is off"


def test_a_caption_draft_version_must_be_a_number(client_for, annotator, coordinator):
    task = leased_caption_task(annotator, coordinator)
    response = client_for(annotator).post(f"/captions/tasks/{task.pk}/draft/", {"text": "x", "version": "new"})
    assert response.status_code == 400
    assert response.json()["errors"] == {"version": ["Send the draft version as a whole number."]}


def test_the_caption_api_refuses_a_stale_draft_too(client_for, annotator, coordinator):
    task = leased_caption_task(annotator, coordinator)
    client = client_for(annotator)
    url = f"/api/captions/tasks/{task.pk}/draft/"
    first = client.put(url, {"text": "one", "version": 0}, content_type="application/json")
    assert first.status_code == 200
    client.put(url, {"text": "two", "version": first.json()["version"]}, content_type="application/json")
    stale = client.put(url, {"text": "three", "version": first.json()["version"]}, content_type="application/json")
    assert stale.status_code == 409
    assert stale.json()["detail"].startswith("The draft changed in another tab")
