"""The data manager in a real Chromium with a real Celery worker: filter the pairs table, select every matching pair,
preview and confirm a bulk accept, watch the job's progress reach done, with the pair below the similarity bar
refused, and undo the whole action."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from annotator.models import Caption, Category, Job, Pair, Review
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
    page.click("button.dm-run")  # first the preview: the count and a sample, nothing run yet
    expect(page.locator("#preview-counts")).to_contain_text("6 will change, 1 will stay as they are")
    expect(page.locator("#preview-sample tbody tr")).to_have_count(7)
    assert not Job.objects.exists()
    shot(page, "bulk-preview-1440.png")
    page.click("#confirm-run")
    page.wait_for_url("**/jobs/*/")
    # One pair refused (below the bar): the job says so rather than a plain green "succeeded".
    expect(page.locator("#job-status .badge")).to_have_text("succeeded with 1 error", timeout=60_000)
    expect(page.locator("#job-status")).to_contain_text("100%")
    expect(page.locator("#job-status")).to_contain_text(f"Pair {low.pk}: Similarity 0.520 is below the threshold")
    expect(page.locator("#bulk-undo")).to_contain_text("6 pairs changed")
    shot(page, "bulk-job-1440.png")

    job = Job.objects.get(kind=Job.Kind.BULK)
    assert job.created_by == coordinator and job.result["filter"] == {"category": "state", "status": "submitted"}
    assert (job.result["ok"], job.result["refused"], job.done) == (6, 1, 7)
    accepted = set(Pair.objects.filter(status=Pair.Status.ACCEPTED).values_list("pk", flat=True))
    assert accepted == {p.pk for p in matching} | {decided.pk}
    assert Pair.objects.get(pk=low.pk).status == Pair.Status.SUBMITTED
    assert all(p.status == Pair.Status.SUBMITTED for p in Pair.objects.filter(pk__in=[o.pk for o in others]))

    page.goto("/tables/pairs/")
    expect(page.locator("#bulk-recent")).to_contain_text("Bulk accept: 7 pairs")
    shot(page, "bulk-undo-banner-1440.png")
    page.click("#recent-undo")  # the whole action taken back: the six pairs are submitted again
    page.wait_for_url("**/jobs/*/")
    expect(page.locator("#bulk-undo")).to_contain_text("6 restored as they were before the action")
    shot(page, "bulk-undone-1440.png")
    assert set(Pair.objects.filter(status=Pair.Status.ACCEPTED).values_list("pk", flat=True)) == {decided.pk}
    assert not Review.objects.filter(reviewer=coordinator).exists()

    page.goto("/tables/videos/?sort=-holder")
    expect(page.locator(".dm-total")).to_have_text("11")
    expect(page.locator("table.dm tbody tr").first).to_contain_text("alice")  # the lease holder
    shot(page, "videos-table-1440.png")
    page.goto("/tables/captions/")
    expect(page.locator("table.dm tbody")).to_contain_text("The second image is sharper.")
    shot(page, "captions-table-1440.png")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sort_filter_search_and_back_keep_every_choice_in_the_address_and_on_the_page(page, coordinator):
    for similarity, category in ((0.91, Category.STATE), (0.97, Category.STATE), (0.94, Category.STATE)):
        make_pair(
            status=Pair.Status.SUBMITTED,
            category=category,
            similarity=similarity,
            question="Where did the camera move?",
        )
    make_pair(status=Pair.Status.SUBMITTED, category=Category.STATE, similarity=0.99, question="Which cup is fuller?")
    make_pair(status=Pair.Status.ACCEPTED, category=Category.TEMPORAL, similarity=0.95)
    browser_login(page, "cora")
    page.goto("/tables/pairs/")
    similarities = page.locator("table.dm tbody tr td:nth-child(9)")  # after the tick box, id, ..., reviewer
    page.get_by_role("link", name="Similarity").click()
    page.wait_for_url("**sort=-similarity**")
    expect(similarities.first).to_have_text("0.990")
    page.select_option("select[name=status]", "submitted")  # a filter after a sort keeps the sort
    expect(page.locator(".dm-total")).to_have_text("4")
    assert "sort=-similarity" in page.url and "status=submitted" in page.url
    expect(similarities.first).to_have_text("0.990")
    page.fill("#dm-search", "camera")
    expect(page.locator(".dm-total")).to_have_text("3")
    expect(similarities).to_have_text(["0.970", "0.940", "0.910"])
    assert "q=camera" in page.url and "sort=-similarity" in page.url
    shot(page, "pairs-sorted-filtered-1440.png")
    # At 1440 px the page is no wider than the window, and the question has room to be read.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1440
    assert page.locator("td.dm-question").first.bounding_box()["width"] >= 200

    page.goto("/jobs/")
    page.go_back()  # the page as the address says: the search box, the filter, the sort and the rows
    expect(page.locator("#dm-search")).to_have_value("camera")
    expect(page.locator("select[name=status]")).to_have_value("submitted")
    expect(page.locator(".dm-total")).to_have_text("3")
    expect(similarities).to_have_text(["0.970", "0.940", "0.910"])
    page.select_option("select[name=category]", "state")  # and what comes next still builds on all of it
    page.wait_for_url("**category=state**")
    expect(page.locator(".dm-total")).to_have_text("3")
    assert page.url.endswith("/tables/pairs/?q=camera&status=submitted&category=state&sort=-similarity"), page.url


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_refused_bulk_action_comes_back_with_its_choices(page, coordinator):
    pairs = [make_pair(status=Pair.Status.SUBMITTED, similarity=0.9 + n / 100) for n in range(3)]
    browser_login(page, "cora")
    page.goto("/tables/pairs/?status=submitted&sort=id")
    page.check(f"input[name=ids][value='{pairs[0].pk}']")
    page.check(f"input[name=ids][value='{pairs[2].pk}']")
    page.select_option("select[name=action]", "reject")
    page.click("button.dm-run")  # a reject needs a reason: refused
    expect(page.locator(".messages")).to_contain_text("Say why the pairs are rejected")
    assert "status=submitted" in page.url and "sort=id" in page.url
    expect(page.locator("select[name=action]")).to_have_value("reject")
    expect(page.locator("input[name=scope][value=selected]")).to_be_checked()
    ticked = page.locator("input[name=ids]:checked")
    expect(ticked).to_have_count(2)
    assert {int(box.get_attribute("value")) for box in ticked.all()} == {pairs[0].pk, pairs[2].pk}
    shot(page, "bulk-refused-1440.png")
    page.fill("input[name=reason]", "Not subtle")
    page.click("button.dm-run")
    page.click("#confirm-run")
    page.wait_for_url("**/jobs/*/")
    assert Job.objects.get(kind=Job.Kind.BULK).title == "Bulk reject: 2 pairs"
