"""The holder of a video a coordinator gives to someone else learns it on their page at once: the next save (or
heartbeat) answers that the lease is gone, a banner says who took it, and the page stops saving."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotator.models import PairDraft
from annotator.picking import services as picking
from tests.conftest import browser_login
from tests.factories import make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_holder_sees_the_reassignment_and_the_page_stops_saving(page, annotator, annotator2, coordinator):
    video = make_video(frames=4, yt8m_id="handed-over")
    picking.video_lease_next(user=annotator)
    browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    expect(page.locator("#lease-status")).to_have_text("lease: yours")
    page.locator("#question").fill("Which image was taken later?")
    page.locator("#question").press("Escape")
    expect(page.locator("#save-status")).to_contain_text("Draft saved")
    saved = PairDraft.objects.get(video=video, author=annotator).state

    picking.video_assign(video=video, user=annotator2, by=coordinator, confirmed=True)
    page.locator("#question").fill("Which image was taken later? Typed after the handover.")
    page.locator("#question").press("Escape")
    banner = page.locator("#lease-gone")
    expect(banner).to_contain_text("cora gave video handed-over to bob")
    expect(banner).to_contain_text("this page no longer saves")
    expect(page.locator("#lease-status")).to_have_text("lease: gone")
    expect(page.locator("#submit-pair")).to_be_disabled()
    assert PairDraft.objects.get(video=video, author=annotator).state == saved, "nothing saved after the handover"
    assert PairDraft.objects.get(video=video, author=annotator2).state == saved, "the draft went to the new holder"
