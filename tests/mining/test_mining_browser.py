"""Mining in a real Chromium with a real similarity worker: a coordinator starts a run from the mining page, sees the
job finish, opens its candidates in the data manager, filters them by similarity and dismisses the ticked ones."""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import expect

from annotator.models import Job, PairCandidate
from tests.conftest import browser_login
from tests.mining.test_mining_job import collection_world

SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")


def shot(page, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, name), full_page=False)


@pytest.mark.browser
@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_coordinator_mines_a_collection_and_dismisses_candidates(page, celery_worker_process, coordinator):
    collection, images = collection_world()
    celery_worker_process(queues="similarity,default")
    browser_login(page, "cora")
    page.goto("/mining/")
    shot(page, "mining-page.png")
    page.select_option("select[name=scope]", str(collection.pk))
    page.fill("input[name=k]", "0")
    page.click("#mining-form button[type=submit]")
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    expect(page.locator(".badge-succeeded").first).to_be_visible(timeout=60_000)
    job = Job.objects.get(kind=Job.Kind.MINE)
    page.reload()
    shot(page, "mining-job.png")
    page.click("text=The candidates")
    # Until the page has loaded, its deferred scripts (htmx) may not have run, and a change made then is lost: once
    # in 15 runs of make test the filter below was never sent.
    page.wait_for_url(re.compile(r"/tables/candidates/\?"))  # waits for the load event
    expect(page.locator(".dm-total")).to_have_text(str(job.result["candidates"]))
    expect(page.locator("input[name=job]")).to_have_value(str(job.pk))
    page.fill("input[name=similarity_min]", "0.9")
    page.locator("input[name=similarity_min]").blur()  # its change event filters (htmx), once
    strong = PairCandidate.objects.filter(job=job, similarity__gte=0.9).count()
    expect(page.locator(".dm-total")).to_have_text(str(strong))
    page.wait_for_load_state("networkidle")
    shot(page, "mining-candidates.png")
    page.locator("input[name=ids]").first.check()
    page.select_option("select.dm-action", "dismiss")
    page.click("button.dm-run")  # the preview of what will change, then its confirm
    page.click("#confirm-run")
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    expect(page.locator(".badge-succeeded").first).to_be_visible(timeout=60_000)
    assert PairCandidate.objects.filter(job=job, status=PairCandidate.Status.DISMISSED).count() == 1
