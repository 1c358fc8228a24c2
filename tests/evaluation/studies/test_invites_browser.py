"""The study invites page in a real Chromium at 1440x900 (issue 26): a copy button per link and for all usable links
(read back from the clipboard), the CSV download, and the open link with the Prolific study URL. SCREENSHOT_DIR
keeps a screenshot."""

from __future__ import annotations

import csv
import io
import os

import pytest
from playwright.sync_api import expect

from annotator.models import Pair
from evaluation.studies import services as studies
from evaluation.studies.views import PROLIFIC_URL_PARAMETERS
from tests.conftest import browser_login
from tests.factories import make_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")


def test_links_are_copied_one_by_one_and_all_together_and_downloaded_as_csv(browser_pages, coordinator):
    for _ in range(3):
        make_pair(status=Pair.Status.ACCEPTED)
    # Three raters per item: room for the three invited people (links beyond a study's places are not usable).
    study = studies.study_create(name="Daily", fraction=1, practice_count=0, open_cap=5, raters_per_item=3)
    links = [studies.invite_url(p) for p in studies.study_invite(study=study, count=3)]
    page = browser_pages.new_page(permissions=["clipboard-read", "clipboard-write"])
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "cora")
    page.goto(f"/studies/{study.pk}/invites/")
    clipboard = lambda: page.evaluate("navigator.clipboard.readText()")  # noqa: E731

    page.locator("#invites tbody tr").nth(1).get_by_role("button", name="Copy").click()
    expect(page.locator("#copy-state")).to_have_text(f"Copied {links[1]}")
    assert clipboard() == links[1]

    page.click("#copy-all")
    expect(page.locator("#copy-state")).to_have_text("Copied 3 links.")
    assert clipboard().split("\n") == links

    prolific = studies.open_url(study) + PROLIFIC_URL_PARAMETERS
    expect(page.locator("#prolific-url")).to_have_text(prolific)
    page.locator("#open-link button").nth(1).click()
    expect(page.locator("#copy-state")).to_have_text(f"Copied {prolific}")
    assert clipboard() == prolific
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, "invites-1440.png"))

    with page.expect_download() as download_info:
        page.click("#invites-csv")
    download = download_info.value
    assert download.suggested_filename == f"study-{study.pk}-invites.csv"
    with open(download.path(), encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(io.StringIO(handle.read())))
    assert [(row["link"], row["state"]) for row in rows] == [(link, "unused") for link in links]
    assert script_errors == []
