"""An edit job walked through in a real Chromium: a coordinator starts it on the page, the fake editing server edits
the image, a reviewer accepts the edit, an annotator authors the question from the draft it came with, a reviewer
accepts the pair, and the export has it with the change's box."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

from annotator.collections import authoring
from annotator.editing.services import edit_job_run
from annotator.export.services import ExportOptions, benchmark_export
from annotator.jobs.services import UnitRef
from annotator.models import ImageEdit, Job, Pair
from tests.conftest import browser_login, wait_until
from tests.editing.edit_fixtures import make_collection
from tests.similarity_fixtures import store_embedding, vector_with_similarity

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set SCREENSHOT_DIR to keep screenshots of the start page and the check page.
SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


def test_edit_accept_author_review_and_export(
    browser_pages, page, coordinator, reviewer, annotator, edit_server, editor_endpoint, tmp_path
):
    collection, images = make_collection([10, 20, 30])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(page, "cora")
    page.goto(f"/edits/?collection={collection.pk}")
    page.select_option("#id_kind", "colour")
    page.select_option("#id_endpoint", str(editor_endpoint.pk))
    page.fill("#id_object_name", "blue ball")
    page.fill("#id_value", "red")
    page.locator("#edit-images input").nth(1).check()
    if SHOTS:
        page.screenshot(path=str(SHOTS / "start-1440.png"))
    page.get_by_role("button", name="Start editing").click()
    job = wait_until(lambda: Job.objects.filter(kind=Job.Kind.EDIT).first(), 15, "the edit job")
    page.wait_for_url(f"**/edits/jobs/{job.pk}/")
    edit_job_run(job_id=job.pk, unit=UnitRef(job.tasks.get().pk, celery_id="browser"))  # as the worker would
    expect(page.locator("#edit-counts")).to_contain_text("1 to check", timeout=10_000)
    if SHOTS:
        page.screenshot(path=str(SHOTS / "job-1440.png"))
    edit = ImageEdit.objects.get(job=job)
    assert edit.image == images[1]

    check = browser_pages.new_page()
    check.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(check, "rita")
    check.goto("/edits/check/")
    expect(check.locator("#edit-instruction")).to_contain_text("Change the colour of the blue ball to red.")
    expect(check.locator(".edit-box")).to_have_count(2)
    if SHOTS:
        check.screenshot(path=str(SHOTS / "check-1440.png"))
    check.get_by_role("button", name="Accept the edit").click()
    expect(check.locator("#no-edits")).to_be_visible()
    candidate = edit.candidate
    candidate.refresh_from_db()
    assert candidate.status == "open"

    # The annotator takes the pair from the queue: the draft question and answer are there, with the change's box.
    base = np.ones(16)
    store_embedding(candidate.image_1, base)
    store_embedding(candidate.image_2, vector_with_similarity(base, 0.93))
    assert authoring.candidate_lease_next(user=annotator) == candidate
    work = browser_pages.new_page()
    work.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(work, "alice")
    work.goto(f"/work/candidates/{candidate.pk}/")
    expect(work.locator("#question")).to_have_value("What changed about the blue ball?")
    expect(work.locator("#answer")).to_have_value("Its colour changed to red.")
    expect(work.locator(".rg-item")).to_have_count(2)
    work.locator("#distractors input").nth(0).fill("Its colour changed to green.")
    work.keyboard.press("Control+Enter")
    work.wait_for_url("**/work/")
    pair = wait_until(lambda: Pair.objects.filter(status="submitted").first(), 15, "the submitted pair")
    assert (pair.category, pair.image_1, pair.image_2) == ("attribute", candidate.image_1, candidate.image_2)

    check.goto(f"/review/pairs/{pair.pk}/")
    expect(check.locator(".rg-item")).to_have_count(2)
    check.keyboard.press("y")
    wait_until(lambda: Pair.objects.get(pk=pair.pk).status == "accepted", 15, "the pair to be accepted")

    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))
    out = tmp_path / "out"
    (line,) = map(json.loads, (out / "metadata/items.jsonl").read_text().splitlines())
    (record,) = map(json.loads, (out / "data/test.jsonl").read_text().splitlines())
    assert line["origin"]["source"] == "photos" and record["category"] == "attribute"
    assert sorted(map(str, line["regions"])) == sorted(map(str, candidate.regions))
    assert record["question"] == "What changed about the blue ball?"
    assert errors == []
