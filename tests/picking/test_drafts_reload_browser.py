"""A reload right after typing, in a real Chromium (issue 14, part 3): the newest text, frames, category and answer
are on the page, are saved, and no older save (the one the left page sent as it went) writes over them, for pair
and caption drafts."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from annotator.captions import services as captions
from annotator.models import Caption, PairDraft
from annotator.picking import services as picking
from tests.conftest import browser_login, make_user, wait_until
from tests.factories import make_pair, make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def hold_back(page, pattern, method):
    """Saves of this page never reach the server until `release` (a slow network: they arrive too late)."""
    page.route(pattern, lambda route: route.abort() if route.request.method == method else route.continue_())
    return lambda: page.unroute(pattern)


def test_a_reload_right_after_typing_shows_and_keeps_the_newest_pair_draft(page, annotator):
    video = make_video(frames=8)
    picking.video_lease_next(user=annotator)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    draft = lambda: PairDraft.objects.get(author=annotator, video=video)  # noqa: E731
    # Frames A and B, the category and the binary answer, by keyboard: all of the draft, not only its text.
    for key in ("ArrowRight", "ArrowRight", "a", "ArrowRight", "ArrowRight", "ArrowRight", "b", "Shift+2", "Shift+B"):
        page.keyboard.press(key)
    page.fill("#question", "What changed about the lamp?")
    expect(page.locator("#save-status")).to_have_text("Draft saved")
    old_version = draft().version

    # The plain race: reload at once (well within 100 ms of the edit).
    page.fill("#question", "What changed about the red lamp?")
    page.reload()
    expect(page.locator("#question")).to_have_value("What changed about the red lamp?")
    # Either order of the race ends with the newest text saved: the page that loaded before the leaving page's beacon
    # arrived saves this browser's copy ("Draft saved"); the one that loaded after it finds the server's draft already
    # the newest and takes it ("Draft restored"). The worst case, forced, follows.
    expect(page.locator("#save-status")).to_have_text(re.compile(r"^Draft (saved|restored)$"))
    assert draft().state["question"] == "What changed about the red lamp?"
    expect(page.locator("#where-a")).to_contain_text("#2 ")
    expect(page.locator("#where-b")).to_contain_text("#5 ")
    expect(page.locator(".category.on")).to_contain_text("state")
    expect(page.locator("#binary-answer button.on")).to_have_text("B")
    assert draft().state["category"] == "state"

    # The worst case: no save of the newest text reaches the server before the new page reads the draft.
    release = hold_back(page, "**/api/videos/*/draft/", "PUT")
    page.fill("#question", "What changed about the red lamp on the desk?")
    page.reload()
    release()
    expect(page.locator("#question")).to_have_value("What changed about the red lamp on the desk?")
    expect(page.locator("#save-status")).to_have_text("Draft saved")
    newest = draft()
    assert newest.state["question"] == "What changed about the red lamp on the desk?"

    # The older save arrives late: refused, nothing written over.
    csrf = json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]
    late = page.request.put(
        f"/api/videos/{video.pk}/draft/",
        data=json.dumps({"state": {"question": "What changed about the lamp?"}, "version": old_version}),
        headers={"Content-Type": "application/json", "X-CSRFToken": csrf},
    )
    assert late.status == 409
    assert draft().state["question"] == "What changed about the red lamp on the desk?"
    # The next keypress builds on the newest text, not on an older one.
    page.locator("#question").press("End")
    page.keyboard.type("!")
    wait_until(lambda: draft().state["question"].endswith("desk?!"), 10, "the next keypress saved")
    assert draft().version > newest.version
    assert errors == []


def test_a_reload_right_after_typing_shows_and_keeps_the_newest_caption_draft(page, annotator):
    pair = make_pair(video=make_video(frames=2))
    captions.caption_batch_create(
        created_by=make_user("cora", "coordinator"), title="t", selection="list", pair_ids=[pair.pk]
    )
    task = captions.caption_task_lease(user=annotator)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(page, "alice")
    page.goto(f"/captions/tasks/{task.pk}/")
    text = lambda: Caption.objects.get(task=task).text  # noqa: E731
    page.fill("#caption-text", "The red square moved to the right.")
    expect(page.locator("[data-save-state]")).to_contain_text("Saved")
    old_version = Caption.objects.get(task=task).draft_version

    page.fill("#caption-text", "The red square moved to the right edge.")
    page.reload()
    expect(page.locator("#caption-text")).to_have_value("The red square moved to the right edge.")
    wait_until(lambda: text() == "The red square moved to the right edge.", 10, "the newest text saved")

    release = hold_back(page, "**/captions/tasks/*/draft/", "POST")
    page.fill("#caption-text", "The red square moved to the right edge of the table.")
    page.reload()
    release()
    expect(page.locator("#caption-text")).to_have_value("The red square moved to the right edge of the table.")
    wait_until(lambda: text() == "The red square moved to the right edge of the table.", 10, "the newest text saved")

    csrf = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
    late = page.request.post(
        f"/captions/tasks/{task.pk}/draft/",
        form={"text": "The red square moved to the right.", "version": str(old_version)},
        headers={"X-CSRFToken": csrf, "Accept": "application/json"},
    )
    assert late.status == 409
    assert text() == "The red square moved to the right edge of the table."
    assert errors == []


def test_back_after_a_saved_draft_shows_the_newest_draft_and_no_false_conflict(page, annotator):
    video = make_video(frames=8)
    picking.video_lease_next(user=annotator)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(page, "alice")
    first = page.goto(f"/work/videos/{video.pk}/")
    assert "no-store" in first.headers["cache-control"]  # the page carries the draft: never kept by the browser
    for key in ("ArrowRight", "a", "ArrowRight", "ArrowRight", "b"):
        page.keyboard.press(key)
    page.fill("#question", "What changed about the kettle?")
    expect(page.locator("#save-status")).to_have_text("Draft saved")
    page.locator("#nav-make summary").click()
    page.get_by_role("link", name="Pick pairs").click()
    page.wait_for_load_state()
    page.go_back()
    expect(page.locator("#question")).to_have_value("What changed about the kettle?")
    expect(page.locator("#where-a")).to_contain_text("#1 ")
    expect(page.locator("#where-b")).to_contain_text("#3 ")
    # Typing on builds on the newest draft: saved, with no "changed in another tab" (there is no other tab).
    page.locator("#question").press("End")
    page.keyboard.type(" lid")
    expect(page.locator("#save-status")).to_have_text("Draft saved")
    expect(page.locator("#draft-conflict")).to_be_hidden()
    draft = PairDraft.objects.get(author=annotator, video=video)
    assert draft.state["question"] == "What changed about the kettle? lid"
    assert errors == []
