"""A reviewer and an annotator talk about a pair in a real Chromium: the rejection opens the thread, the annotator
finds it from the home page, answers "fixed, please look again" on the workbench, and the pair is back in review
with the whole thread shown to the reviewer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotator.models import Pair
from tests.conftest import browser_login
from tests.factories import make_pair, make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


def shot(page, name: str) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"))


def test_reject_thread_fixed_and_back_in_review(browser_pages, annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator, video=make_video(frames=3, yt8m_id="talk-vid"))
    rita = browser_pages.new_page()
    browser_login(rita, "rita")
    rita.goto(f"/review/pairs/{pair.pk}/")
    expect(rita.locator(f"#thread-pair-{pair.pk}")).to_contain_text("No comments yet.")
    rita.keyboard.press("n")
    rita.locator("#reject-reason").fill("The cup moved left, not right: check the answer.")
    rita.locator("#send-reject").click()
    rita.wait_for_url("**/review/**")

    alice = browser_pages.new_page()
    browser_login(alice, "alice")
    unread = alice.locator("#talk-unread")
    expect(unread).to_contain_text("1 new comment")
    unread.get_by_role("link", name=f"temporal pair {pair.pk}").click()
    alice.wait_for_url(f"**/work/videos/{pair.video_id}/?pair={pair.pk}")
    thread = alice.locator(f"#talk-panel #thread-pair-{pair.pk}")
    expect(thread).to_contain_text("The cup moved left, not right")
    expect(thread.locator(".talk-rejection .badge-rejected")).to_have_text("rejected")
    expect(thread.locator(".talk-new")).to_have_count(1)
    thread.locator("textarea[name=body]").fill("Fixed the answer to 'left', @rita please look again.")
    thread.get_by_role("button", name="Fixed, please look again").click()
    expect(alice.locator(f"#thread-pair-{pair.pk}")).to_have_attribute("data-status", "submitted")
    pair.refresh_from_db()
    assert pair.status == Pair.Status.SUBMITTED

    rita.goto("/")
    expect(rita.locator("#talk-unread")).to_contain_text("mentions you")
    rita.goto(f"/review/pairs/{pair.pk}/")
    review_thread = rita.locator(f"#thread-pair-{pair.pk}")
    expect(review_thread.locator(".talk-item")).to_have_count(2)
    expect(review_thread.locator(".talk-fixed")).to_contain_text("@rita please look again")
    expect(rita.locator("#accept")).to_be_visible()  # back in review: the reviewer may decide again
    # Typing in the thread is text, never a review shortcut.
    review_thread.locator("textarea[name=body]").fill("Thanks, accepting now.")
    review_thread.get_by_role("button", name="Post").click()
    expect(review_thread.locator(".talk-item")).to_have_count(3)
    pair.refresh_from_db()
    assert pair.status == Pair.Status.SUBMITTED
    shot(rita, "thread-in-review-1440")
