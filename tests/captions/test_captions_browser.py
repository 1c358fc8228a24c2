"""Captions in a real Chromium: an annotator writes and submits with the keyboard, a reviewer accepts with `y`."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotator.captions import services as captions
from annotator.models import Caption
from tests.conftest import browser_login, wait_until
from tests.factories import make_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEXT = "In the second image the orange square has moved slightly to the right."


def start_captioning(page) -> None:
    """Open the queue and take a task with Enter (Chromium applies autofocus a moment after load)."""
    page.goto("/captions/work/")
    expect(page.get_by_role("button", name="Start captioning")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url("**/captions/tasks/*/")


def test_an_annotator_captions_with_the_keyboard_and_a_reviewer_accepts_it(
    page, browser_pages, annotator, reviewer, coordinator
):
    pair = make_pair(question="Which image was taken later?")
    captions.caption_batch_create(created_by=coordinator, title="browser", selection="list", pair_ids=[pair.pk])

    browser_login(page, "alice")
    start_captioning(page)
    assert "Which image was taken later?" not in page.content()

    # The viewers (the shared comparison viewer): holding f shows B in viewer A, + zooms both images together.
    page.locator("h1").click()
    page.keyboard.down("f")
    expect(page.locator("#img-a")).to_have_attribute("src", pair.image_2.file.url)
    page.keyboard.up("f")
    expect(page.locator("#img-a")).to_have_attribute("src", pair.image_1.file.url)
    fitted = page.locator("#img-a").bounding_box()["width"]
    page.keyboard.press("+")
    widths = [page.locator(image).bounding_box()["width"] for image in ("#img-a", "#img-b")]
    assert widths[0] == widths[1] == pytest.approx(fitted * 1.25, abs=0.5)
    page.keyboard.press("0")

    # Autosave, then a reload restores the draft.
    page.locator("#caption-text").click()
    page.keyboard.type(TEXT[:30])
    wait_until(lambda: Caption.objects.filter(status="draft", text=TEXT[:30]).exists(), 15, "the autosaved draft")
    page.reload()
    assert page.locator("#caption-text").input_value() == TEXT[:30]
    page.locator("#caption-text").press("End")
    page.keyboard.type(TEXT[30:])
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/captions/work/")
    assert "Caption submitted." in page.locator("#toast").inner_text()
    caption = Caption.objects.get(author=annotator)
    assert (caption.status, caption.text) == ("submitted", TEXT)

    context = browser_pages.new_context(viewport={"width": 1440, "height": 900})
    review = context.new_page()
    try:
        browser_login(review, "rita")
        review.goto("/captions/review/")
        assert review.locator("#caption-under-review").inner_text() == TEXT
        review.keyboard.press("y")
        review.wait_for_selector("#toast:not(:empty)")
        assert "accepted and chosen for the export" in review.locator("#toast").inner_text()
    finally:
        context.close()
    caption.refresh_from_db()
    assert (caption.status, caption.chosen) == ("accepted", True)
    assert pair.chosen_caption == caption


def test_escape_never_skips_and_x_skips_with_a_chosen_reason(page, annotator, coordinator):
    pair = make_pair()
    captions.caption_batch_create(created_by=coordinator, title="skip", selection="list", pair_ids=[pair.pk])
    browser_login(page, "alice")
    start_captioning(page)
    dialog = page.locator("#skip-dialog")
    page.keyboard.press("Escape")  # leaves the text; opens nothing
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")  # outside the text, Enter goes to the caption box: it skips nothing
    expect(dialog).to_be_hidden()
    expect(page.locator("textarea[name=text]")).to_be_focused()
    page.keyboard.press("Escape")
    page.keyboard.press("x")  # outside the text: the deliberate key
    expect(dialog).to_be_visible()
    expect(page.locator("#skip-reason")).to_have_value("")
    expect(page.locator("[data-action=confirm-skip]")).to_be_disabled()
    page.locator("#skip-reason").press("Enter")  # no reason: nothing is sent
    expect(dialog).to_be_visible()
    assert not pair.caption_tasks.get().skips.exists()
    page.locator("[data-reason='No visible difference']").click()
    page.locator("#skip-reason").press("Enter")  # with a reason too: Enter in a field never sends
    page.wait_for_timeout(300)
    expect(dialog).to_be_visible()
    page.locator("#skip-reason").press("Control+Enter")
    page.wait_for_url("**/captions/work/")
    assert pair.caption_tasks.get().skips.get().reason == "No visible difference"


def test_a_caption_skip_is_undone_from_the_work_page_and_stop_releases_with_the_text_kept(page, annotator, coordinator):
    pair = make_pair()
    captions.caption_batch_create(created_by=coordinator, title="undo", selection="list", pair_ids=[pair.pk])
    browser_login(page, "alice")
    start_captioning(page)
    task_url = page.url
    page.keyboard.press("x")
    page.locator("[data-reason='Several differences']").click()
    page.get_by_role("button", name="Skip and stop").click()
    page.wait_for_url("**/captions/work/")
    expect(page.locator("#toast")).to_contain_text(f"Skipped pair {pair.pk}")
    expect(page.get_by_role("button", name="Start captioning")).to_be_disabled()  # the only task was skipped
    page.get_by_role("button", name="Undo").click()
    expect(page.locator("#toast")).to_contain_text(f"pair {pair.pk} is offered to you again")
    page.get_by_role("button", name="Start captioning").click()
    page.wait_for_url(task_url)

    # Stop and release: the text typed a moment ago goes with it, and comes back with the task.
    page.locator("#caption-text").click()
    page.keyboard.type("The square is a little larger")
    page.get_by_role("button", name="Stop and release").click()
    page.wait_for_url("**/captions/work/")
    expect(page.locator("#toast")).to_contain_text(f"Released pair {pair.pk}")
    assert pair.caption_tasks.get().lease_holder_id is None
    page.get_by_role("button", name="Start captioning").click()
    page.wait_for_url(task_url)
    expect(page.locator("#caption-text")).to_have_value("The square is a little larger")
