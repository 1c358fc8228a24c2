"""The new-study form and a phone on the default settings, in a real Chromium (issue 26): the form says how many
participants its settings admit and warns, as they change, when the invite links outnumber them; a phone at 390×844
passes the default window check and can agree and start."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from annotator.models import Category, Domain
from evaluation.studies import services as studies
from tests.conftest import browser_login
from tests.evaluation.studies.test_evaluation_screens_browser import PHONE_UA, phone
from tests.factories import make_pair
from tests.release_factories import make_release

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")


def shot(page, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, name))


def release_of(count: int):
    categories = [Category.TEMPORAL, Category.STATE]
    return make_release([make_pair(category=categories[i % 2], domain=Domain.NATURAL) for i in range(count)])


def test_the_study_form_counts_participants_and_warns_before_anyone_is_invited(page, coordinator):
    release_of(12)
    browser_login(page, "cora")
    page.goto("/studies/")
    page.fill("input[name=fraction]", "0.5")  # 6 items
    admitted = page.locator("#plan-admitted")
    expect(admitted).to_have_text("1")  # the defaults: 1 rater per item, every item each: one person
    expect(page.locator("#plan-warning")).to_have_count(0)  # and one invite link
    page.fill("input[name=invites]", "5")
    expect(page.locator("#plan-warning")).to_contain_text("5 invite links, but these settings admit 1 participant")
    shot(page, "study-form-warning-1440.png")
    page.fill("input[name=items_per_participant]", "2")
    expect(admitted).to_have_text("3")
    page.fill("input[name=raters_per_item]", "2")
    expect(admitted).to_have_text("6")
    expect(page.locator("#plan-warning")).to_have_count(0)
    expect(page.locator("#study-plan")).to_contain_text("6 items from a pool of 12")
    shot(page, "study-form-1440.png")


def test_a_phone_passes_the_default_window_check_and_starts(browser_pages):
    for i in range(8):
        make_pair(category=[Category.TEMPORAL, Category.STATE][i % 2], domain=Domain.NATURAL)
    study = studies.study_create(name="Phones", fraction=0.5, practice_count=1)  # every default of the window check
    participant = studies.participant_create(study=study)
    context, page = phone(browser_pages, user_agent=PHONE_UA)
    try:
        page.goto(f"/p/{participant.token}/")
        expect(page.locator("#screen-check")).to_be_hidden()
        expect(page.locator("#consent-form")).to_be_visible()
        shot(page, "participant-start-390.png")
        page.check("input[name=agree]")
        with page.expect_navigation():
            page.click("#start")
        participant.refresh_from_db()
        assert participant.consented_at is not None and participant.viewport_width == 390
        shot(page, "participant-after-consent-390.png")
    finally:
        context.close()
