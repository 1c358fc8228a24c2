"""The data manager in a real Chromium with a real Celery worker: filter the pairs table, select every matching pair,
bulk accept them, and watch the job's progress reach done, with the pair below the similarity bar refused."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from annotator.models import Caption, Category, Job, Pair
from annotator.picking import services as picking
from tests.conftest import browser_login
from tests.factories import make_pair

SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")


def shot(page, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, name), full_page=False)


@pytest.mark.browser
@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_coordinator_filters_selects_all_matching_and_bulk_accepts(
    page, celery_worker_process, coordinator, annotator, annotator2
):
    matching = [
        make_pair(status=Pair.Status.SUBMITTED, author=annotator, category=Category.STATE, question=q)
        for q in ("Which apple is peeled more?", "Which door is open wider?", "Which glass is fuller?") * 2
    ]
    low = make_pair(
        status=Pair.Status.SUBMITTED, author=annotator2, category=Category.STATE, similarity=0.52, question="Peeled?"
    )
    others = [make_pair(status=Pair.Status.SUBMITTED, author=annotator) for _ in range(3)]  # temporal: not matching
    decided = make_pair(author=annotator2, category=Category.QUALITY, question="Which image is sharper?")
    Caption.objects.create(
        pair=decided, author=annotator, text="The second image is sharper.", status="accepted", chosen=True
    )
    picking.video_heartbeat(video=others[0].video, user=annotator)
    celery_worker_process()

    browser_login(page, "cora")
    page.goto("/tables/pairs/")
    expect(page.locator(".dm-total")).to_have_text("11")
    page.select_option("select[name=status]", "submitted")
    expect(page.locator(".dm-total")).to_have_text("10")
    page.select_option("select[name=category]", "state")
    expect(page.locator(".dm-total")).to_have_text("7")
    assert "category=state" in page.url and "status=submitted" in page.url  # the filter state is in the URL
    shot(page, "pairs-table-1440.png")

    page.check("input.dm-matching")
    page.select_option("select[name=action]", "accept")
    page.click("button.dm-run")
    page.wait_for_url("**/jobs/*/")
    expect(page.locator("#job-status .badge")).to_have_text("succeeded", timeout=60_000)
    expect(page.locator("#job-status")).to_contain_text("100%")
    expect(page.locator("#job-status")).to_contain_text(f"Pair {low.pk}: Similarity 0.520 is below the threshold")
    shot(page, "bulk-job-1440.png")

    job = Job.objects.get(kind=Job.Kind.BULK)
    assert job.created_by == coordinator and job.result["filter"] == {"category": "state", "status": "submitted"}
    assert (job.result["ok"], job.result["refused"], job.done) == (6, 1, 7)
    accepted = set(Pair.objects.filter(status=Pair.Status.ACCEPTED).values_list("pk", flat=True))
    assert accepted == {p.pk for p in matching} | {decided.pk}
    assert Pair.objects.get(pk=low.pk).status == Pair.Status.SUBMITTED
    assert all(p.status == Pair.Status.SUBMITTED for p in Pair.objects.filter(pk__in=[o.pk for o in others]))

    page.goto("/tables/videos/?sort=-holder")
    expect(page.locator(".dm-total")).to_have_text("11")
    expect(page.locator("table.dm tbody tr").first).to_contain_text("alice")  # the lease holder
    shot(page, "videos-table-1440.png")
    page.goto("/tables/captions/")
    expect(page.locator("table.dm tbody")).to_contain_text("The second image is sharper.")
    shot(page, "captions-table-1440.png")
