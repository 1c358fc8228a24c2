"""A coordinator's and a reviewer's day in a real Chromium at 1440x900 (issue 26): the overview's Held now count
agrees with Who holds what, a video is assigned from the picker, a refused assignment is shown beside its form in
view, and the review page's Reject button stays in view when the reason box opens. SCREENSHOT_DIR keeps a
screenshot of each page for a look."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from annotator.captions import services as captions
from annotator.models import Pair, Video
from annotator.picking import services as picking
from tests.conftest import browser_login, wait_until
from tests.factories import make_pair, make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")
VIEWPORT_HEIGHT = 900


def shot(page, name):
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, name))


def in_view(locator) -> bool:
    box = locator.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT_HEIGHT


def test_the_overview_counts_what_it_lists_and_assigns_from_the_picker(page, coordinator, annotator, annotator2):
    held = make_video(frames=2, yt8m_id="held-video")
    assert picking.video_lease_next(user=annotator).pk == held.pk
    pair = make_pair(status=Pair.Status.ACCEPTED)
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[pair.pk])
    assert captions.caption_task_lease(user=annotator2) is not None
    free = make_video(frames=2, yt8m_id="zz-free-video")
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "cora")
    page.goto("/overview/")

    listed = page.locator("#holdings tbody td:nth-child(2) > div")
    expect(listed).to_have_count(2)  # one video and one caption task, each "for less than a minute"
    expect(page.locator("#held-now .big")).to_have_text("2")
    expect(page.locator("#held-now")).to_contain_text("1 video, 1 caption task")
    expect(page.locator("#holdings")).to_contain_text("for less than a minute")
    expect(page.locator("#holdings")).not_to_contain_text("0 minutes")
    shot(page, "overview-1440.png")
    # Every table stays inside its card: the per-category table used to run past the card's right edge.
    spilled = page.evaluate(
        """() => [...document.querySelectorAll('.overview-grid > .card table')].filter(table => {
            const card = table.closest('.card').getBoundingClientRect();
            return table.getBoundingClientRect().right > card.right - 1 || table.scrollWidth > table.clientWidth + 1;
        }).map(table => table.id || table.closest('.card').querySelector('h2').textContent)"""
    )
    assert spilled == []
    # The caption task a person holds is named by its pair, not by ids.
    expect(page.locator("#holdings")).to_contain_text("caption of the temporal pair on")

    # The picker: the id field offers the assignable videos (a datalist: type a part, pick one).
    options = page.locator("#assignable-videos option")
    assert "zz-free-video" in options.evaluate_all("options => options.map(o => o.value)")
    assert page.locator("#assign-video").get_attribute("list") == "assignable-videos"

    # A refused assignment lands on the form, the reason beside it, in view, the typed id kept and focused.
    page.fill("#assign-video", "zz-free-vide")
    page.select_option("#overview-assign select[name=user]", str(annotator.pk))
    page.click("#overview-assign button.primary")
    page.wait_for_url("**/overview/")
    error = page.locator("#overview-assign #assign-error")
    expect(error).to_contain_text("No video has the YouTube-8M id 'zz-free-vide': pick one from the list.")
    assert in_view(error) and in_view(page.locator("#overview-assign button.primary"))
    expect(page.locator("#assign-video")).to_be_focused()
    expect(page.locator("#assign-video")).to_have_value("zz-free-vide")
    expect(page.locator("#overview-assign select[name=user]")).to_have_value(str(annotator.pk))
    shot(page, "overview-assign-refused-1440.png")

    page.fill("#assign-video", "zz-free-video")  # as picking the datalist's option sets it
    page.click("#overview-assign button.primary")
    wait_until(lambda: Video.objects.get(pk=free.pk).assigned_to_id == annotator.pk, 15, "the assignment")
    expect(page.locator("#assign-error")).to_have_count(0)
    assert script_errors == []


def a_pair_with_five_options(annotator) -> Pair:
    """An attribute pair with its answer and four distractors: the tallest card a review page shows."""
    return make_pair(
        status=Pair.Status.SUBMITTED,
        author=annotator,
        category="attribute",
        question="What changed about the mug on the left of the table between the two images?",
        answer="its handle turned from the left to the right",
        distractors=["its colour went from red to blue", "it became taller", "its texture became matte", "a chip"],
    )


def test_the_reject_button_is_in_view_when_the_reason_box_opens(page, annotator, reviewer):
    pair = a_pair_with_five_options(annotator)
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{pair.pk}/")
    expect(page.locator("#decide")).to_be_visible()
    page.click("#reject")
    expect(page.locator("#reject-reason")).to_be_focused()
    send = page.locator("#send-reject")
    expect(send).to_be_visible()
    wait_until(lambda: in_view(send), 5, "the Reject button in the 900 px viewport")
    assert in_view(page.locator("#reject-reason")) and in_view(page.locator("#cancel-reject"))
    shot(page, "review-reject-open-1440.png")
    send.click()  # no reason: refused, and the page names no raw field ("reason: ...")
    expect(page.locator("#errors")).to_have_text("Reason: Say why the pair is rejected: the author reads it.")
    page.fill("#reject-reason", "The difference is not visible.")
    send.click()
    wait_until(lambda: Pair.objects.get(pk=pair.pk).status == Pair.Status.REJECTED, 15, "the pair to be rejected")
    assert script_errors == []


def test_the_reject_button_is_in_view_when_opened_by_key_too(page, annotator, reviewer):
    pair = a_pair_with_five_options(annotator)
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{pair.pk}/")
    expect(page.locator("#decide")).to_be_visible()
    page.keyboard.press("n")
    expect(page.locator("#reject-reason")).to_be_focused()
    wait_until(lambda: in_view(page.locator("#send-reject")), 5, "the Reject button in the 900 px viewport")
