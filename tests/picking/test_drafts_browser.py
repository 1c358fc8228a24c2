"""Two browsers of one annotator on one workbench, in a real Chromium (issue 17): the stale one is told that the
draft changed elsewhere, keeps its text on screen, and chooses which draft to keep."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from annotator.models import PairDraft
from annotator.picking import services as picking
from tests.conftest import browser_login
from tests.factories import make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")


def saved_question(annotator, video) -> str:
    return PairDraft.objects.get(author=annotator, video=video).state.get("question", "")


def test_a_second_browser_is_told_the_draft_changed_and_loses_nothing(browser_pages, page, annotator):
    video = make_video(frames=6)
    picking.video_lease_next(user=annotator)
    script_errors = []
    second_context = browser_pages.new_context(viewport={"width": 1440, "height": 900})
    second = second_context.new_page()
    for tab in (page, second):
        tab.on("pageerror", lambda error: script_errors.append(str(error)))
        browser_login(tab, "alice")
        tab.goto(f"/work/videos/{video.pk}/")  # both open before either saves

    page.fill("#question", "What did the person do with the cup?")
    expect(page.locator("#save-status")).to_have_text("Draft saved")

    second.fill("#question", "Which lamp is brighter?")
    banner = second.locator("#draft-conflict")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("The draft changed in another tab")
    expect(banner).to_contain_text("What did the person do with the cup?")
    expect(second.locator("#question")).to_have_value("Which lamp is brighter?")  # kept on screen
    assert saved_question(annotator, video) == "What did the person do with the cup?"  # nothing written over
    if SCREENSHOTS:
        second.screenshot(path=os.path.join(SCREENSHOTS, "draft-conflict-1440.png"))

    second.click("#draft-load-newer")
    expect(second.locator("#question")).to_have_value("What did the person do with the cup?")
    expect(banner).to_contain_text("This tab's version was “Which lamp is brighter?”")
    if SCREENSHOTS:
        second.screenshot(path=os.path.join(SCREENSHOTS, "draft-conflict-loaded-1440.png"))

    second.click("#draft-keep-mine")  # "Back to this tab's version": it is saved over, knowingly
    expect(second.locator("#question")).to_have_value("Which lamp is brighter?")
    expect(second.locator("#save-status")).to_have_text("Draft saved")
    expect(banner).to_be_hidden()
    assert saved_question(annotator, video) == "Which lamp is brighter?"

    # The first browser is now the stale one: it is told in turn, and its own text stays on its screen.
    page.fill("#question", "What did the person do with the cup? (edited)")
    expect(page.locator("#draft-conflict")).to_contain_text("Which lamp is brighter?")
    page.click("#draft-keep-mine")
    expect(page.locator("#save-status")).to_have_text("Draft saved")
    assert saved_question(annotator, video) == "What did the person do with the cup? (edited)"
    second_context.close()
    assert script_errors == []


def test_a_second_browser_on_a_caption_task_is_told_and_can_put_its_text_back(browser_pages, page, annotator):
    from annotator.captions import services as captions
    from annotator.models import Caption
    from tests.conftest import make_user
    from tests.factories import make_pair

    pair = make_pair(video=make_video(frames=2))
    captions.caption_batch_create(
        created_by=make_user("cora", "coordinator"), title="t", selection="list", pair_ids=[pair.pk]
    )
    task = captions.caption_task_lease(user=annotator)
    script_errors = []
    second_context = browser_pages.new_context(viewport={"width": 1440, "height": 900})
    second = second_context.new_page()
    for tab in (page, second):
        tab.on("pageerror", lambda error: script_errors.append(str(error)))
        browser_login(tab, "alice")
        tab.goto(f"/captions/tasks/{task.pk}/")

    page.fill("#caption-text", "In the second image the red square has moved to the right.")
    expect(page.locator("[data-save-state]")).to_contain_text("Saved")
    second.fill("#caption-text", "The lamp in the corner is switched off in the second image.")
    box = second.locator("[data-draft-conflict]")
    expect(box).to_contain_text("The draft changed in another tab")
    assert Caption.objects.get(task=task).text == "In the second image the red square has moved to the right."
    if SCREENSHOTS:
        second.screenshot(path=os.path.join(SCREENSHOTS, "caption-draft-conflict-1440.png"))

    second.click("[data-action=load-newer]")
    expect(second.locator("#caption-text")).to_have_value("In the second image the red square has moved to the right.")
    expect(box).to_contain_text("This tab's text was “The lamp in the corner is switched off")
    second.click("[data-action=keep-mine]")
    expect(second.locator("#caption-text")).to_have_value("The lamp in the corner is switched off in the second image.")
    expect(second.locator("[data-save-state]")).to_contain_text("Saved")
    assert Caption.objects.get(task=task).text == "The lamp in the corner is switched off in the second image."
    second_context.close()
    assert script_errors == []
