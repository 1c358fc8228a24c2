"""Nothing thrown away by accident, in a real Chromium (issue 14, part 3): Esc and Enter skip nothing, a skip needs
a reason chosen on purpose and can be undone from the work page, and a decision can be reopened from the review
page."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from annotator.models import Pair, Review, Video, VideoSkip
from annotator.picking import services as picking
from tests.conftest import browser_login, wait_until
from tests.factories import make_pair, make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")


def shot(page, name):
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, name))


def test_esc_and_enter_skip_nothing_and_a_skip_is_undone_from_the_work_page(page, annotator):
    video = make_video(frames=4)  # the only video: once skipped, nothing is offered until the skip is undone
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "alice")
    page.goto("/work/")
    page.click("#ask-for-work")
    page.wait_for_url(f"**/work/videos/{video.pk}/")
    dialog = page.locator("#skip-dialog")

    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")  # submits the pair from anywhere: refused, A and B are not set
    expect(page.locator("#errors")).to_contain_text("Set frame A and frame B")
    page.keyboard.press("Enter")  # outside a field Enter goes to the question
    expect(page.locator("#question")).to_be_focused()
    page.keyboard.press("Escape")  # leaves the field
    expect(page.locator("#question")).not_to_be_focused()
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    expect(page.locator("#question")).to_be_focused()  # Enter went to the question
    page.keyboard.press("Escape")

    page.keyboard.press("x")  # the deliberate key: a dialog with no reason chosen
    expect(dialog).to_be_visible()
    expect(page.locator("#skip-reasons input:checked")).to_have_count(0)
    expect(page.locator("#skip-confirm")).to_be_disabled()
    shot(page, "skip-dialog-1440.png")
    page.keyboard.press("Enter")  # on the focused radio: nothing is chosen, nothing happens
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # in the note field, likewise
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")  # closes the dialog, skips nothing
    expect(dialog).to_be_hidden()
    page.wait_for_timeout(300)
    assert not VideoSkip.objects.exists()
    assert Video.objects.get(pk=video.pk).lease_holder == annotator

    page.click("#skip-video")
    page.check("#skip-reasons input[value=no_pair]")
    expect(page.locator("#skip-confirm")).to_be_enabled()
    page.click("#skip-confirm")
    page.wait_for_url("**/work/")
    skip = VideoSkip.objects.get()
    assert (skip.video, skip.user, skip.reason) == (video, annotator, "no_pair")
    skipped = page.locator("#skipped")
    expect(skipped).to_contain_text(video.yt8m_id)
    expect(skipped).to_contain_text("no usable pair")
    shot(page, "work-skipped-1440.png")

    page.click("#ask-for-work")  # skipped: not offered
    expect(page.locator("body")).to_contain_text("No video is left for you")
    page.locator("#skipped button", has_text="Undo").click()
    expect(page.locator("body")).to_contain_text(f"video {video.yt8m_id} is offered to you again")
    expect(page.locator("#skipped")).to_have_count(0)
    page.click("#ask-for-work")
    page.wait_for_url(f"**/work/videos/{video.pk}/")
    assert not VideoSkip.objects.exists()
    assert script_errors == []


def test_a_reviewer_reopens_a_decision_from_the_review_page(page, annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator, video=make_video(frames=2))
    picking.pair_review(pair=pair, reviewer=reviewer, decision="accept", version=pair.version)
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{pair.pk}/")
    expect(page.locator("#reopen-form")).to_be_visible()
    page.fill("#reopen-reason", "The shelf also changed: two differences.")
    shot(page, "review-reopen-1440.png")
    page.keyboard.press("y")  # typing in the reason: no decision key acts
    page.click("#reopen")
    expect(page.locator("#pair-status")).to_have_text("submitted")
    expect(page.locator(".history")).to_contain_text("The shelf also changed: two differences.")
    wait_until(lambda: Pair.objects.get(pk=pair.pk).status == Pair.Status.SUBMITTED, 5, "the pair reopened")
    assert list(Review.objects.filter(pair=pair).values_list("decision", flat=True)) == ["reopen", "accept"]
    assert script_errors == []


def test_an_annotator_withdraws_a_pair_on_the_workbench(page, annotator):
    video = make_video(frames=3)
    picking.video_lease_next(user=annotator)
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator, video=video)
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    page.locator("#pairs button", has_text="withdraw").click()
    expect(page.locator("#pairs")).to_contain_text("withdrawn")
    expect(page.locator("#pairs button", has_text="withdraw")).to_have_count(0)
    wait_until(lambda: Pair.objects.get(pk=pair.pk).status == Pair.Status.WITHDRAWN, 5, "the pair withdrawn")
    assert script_errors == []
