"""One keyboard contract on every page (issue 26, `static/js/keys.js`), in a real Chromium: Enter in a field never
submits (the pair workbench, the caption workbench and its skip dialog, both review pages), Ctrl+Enter submits
with the button nearest the field, and the editor's empty distractor slots are left out rather than refused."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from annotator.captions import services as captions
from annotator.models import Caption, CaptionSkip, Pair, Review
from annotator.picking import services as picking
from tests.conftest import browser_login, wait_until
from tests.factories import make_pair, make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")


def keys_dialog_fits(page, name: str) -> None:
    """`?` opens the page's keys: inside a 1440x900 window, at its top (its Close button, focused, is in view)."""
    page.keyboard.press("?")
    dialog = page.locator("#keys-dialog")
    expect(dialog).to_be_visible()
    box = dialog.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 900, box
    close = dialog.get_by_role("button", name="Close")
    expect(close).to_be_focused()
    assert close.bounding_box()["y"] < box["y"] + 80  # the list opens at its top, not scrolled to its end
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, name))
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_enter_in_every_field_of_the_pair_workbench_submits_nothing_and_ctrl_enter_submits(page, annotator):
    video = make_video(frames=8)
    picking.video_lease_next(user=annotator)
    browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    for key in ("ArrowRight", "a", "ArrowRight", "ArrowRight", "b", "Shift+0"):  # A, B and "action"
        page.keyboard.press(key)
    page.fill("#question", "What did the cyclist do?")
    page.fill("#answer", "raised a hand")
    page.locator("#distractors input").first.fill("sat down")
    page.click("#add-distractor")  # an empty slot, as the templates leave them
    fields = [
        "#question",
        "#answer",
        *[f"#distractors input >> nth={n}" for n in range(page.locator("#distractors input").count())],
    ]
    assert len(fields) >= 4
    for field in fields:
        page.locator(field).focus()
        page.keyboard.press("Enter")
    page.wait_for_timeout(500)  # a submit would be on its way by now
    assert not Pair.objects.exists(), "Enter in a field submitted the pair"
    expect(page.locator("#errors")).to_be_empty()

    page.keyboard.press("Escape")
    keys_dialog_fits(page, "workbench-keys-1440.png")
    page.locator("#distractors input").last.focus()  # the empty slot
    page.keyboard.press("Control+Enter")
    pair = wait_until(lambda: Pair.objects.filter(status="submitted").first(), 15, "the submitted pair")
    assert (pair.question, pair.answer, pair.distractors) == ("What did the cyclist do?", "raised a hand", ["sat down"])


def test_enter_in_the_caption_box_and_the_skip_reason_submits_nothing(page, annotator, coordinator):
    pair = make_pair()
    captions.caption_batch_create(created_by=coordinator, title="keys", selection="list", pair_ids=[pair.pk])
    browser_login(page, "alice")
    page.goto("/captions/work/")
    page.get_by_role("button", name="Start captioning").click()
    page.wait_for_url("**/captions/tasks/*/")
    box = page.locator("#caption-text")
    box.click()
    page.keyboard.type("The mug moved.")
    page.keyboard.press("Enter")  # a new line
    page.keyboard.type("It is closer to the edge.")
    expect(box).to_have_value("The mug moved.\nIt is closer to the edge.")
    page.keyboard.press("Escape")
    expect(box).not_to_be_focused()

    keys_dialog_fits(page, "caption-workbench-keys-1440.png")
    page.keyboard.press("x")
    page.locator("[data-reason='No visible difference']").click()
    page.locator("#skip-reason").press("Enter")  # a reason is there, and still Enter sends nothing
    page.wait_for_timeout(500)
    expect(page.locator("#skip-dialog")).to_be_visible()
    assert not CaptionSkip.objects.exists()
    page.locator("#skip-reason").press("Control+Enter")
    page.wait_for_url("**/captions/work/")
    assert CaptionSkip.objects.get().reason == "No visible difference"


def test_enter_in_a_reason_decides_nothing_and_ctrl_enter_sends_that_forms_decision(page, annotator, reviewer):
    pair = make_pair(
        status="submitted",
        author=annotator,
        category="action",
        question="What did the cyclist do?",
        answer="raised a hand",
        distractors=["sat down"],
        similarity=0.93,
    )
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{pair.pk}/")
    keys_dialog_fits(page, "review-keys-1440.png")
    page.keyboard.press("n")
    page.keyboard.type("Too blurry")
    page.keyboard.press("Enter")  # in the reason box: a new line, no decision
    page.wait_for_timeout(500)
    assert not Review.objects.exists(), "Enter in the reason decided"
    expect(page.locator("#reject-reason")).to_have_value("Too blurry\n")
    page.keyboard.press("Backspace")
    page.keyboard.press("Control+Enter")  # the reject form's button, not Accept
    review = wait_until(lambda: Review.objects.first(), 15, "the review")
    assert (review.decision, review.reason) == ("reject", "Too blurry")


def test_enter_in_a_caption_reject_reason_decides_nothing(page, annotator, reviewer, coordinator):
    pair = make_pair()
    captions.caption_batch_create(created_by=coordinator, title="keys", selection="list", pair_ids=[pair.pk])
    task = captions.caption_task_lease(user=annotator)
    captions.caption_submit(task_id=task.pk, user=annotator, text="In the second image the mug stands at the edge.")
    browser_login(page, "rita")
    page.goto("/captions/review/")
    keys_dialog_fits(page, "caption-review-keys-1440.png")
    page.keyboard.press("n")
    reason = page.locator(".reject-box input[name=reason]")
    expect(reason).to_be_focused()
    page.keyboard.type("Describes the wrong object")
    page.keyboard.press("Enter")
    page.wait_for_timeout(500)
    assert Caption.objects.get().status == "submitted", "Enter in the reason decided"
    page.keyboard.press("Control+Enter")  # "Reject with this reason", not the form's first button (Accept)
    wait_until(lambda: Caption.objects.get().status == "rejected", 15, "the rejected caption")
