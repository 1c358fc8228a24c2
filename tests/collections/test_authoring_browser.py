"""Image collections end to end in a real Chromium (issue 27): an MVTec-AD-shaped and a LEVIR-CD-shaped folder are
imported, an annotator authors one pair of each in the pair workbench (and skips one, then undoes the skip), a
reviewer accepts both, and the export has them with their domains and, in the provenance sidecar, their regions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

from annotator.collections.services import collection_import
from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import CandidateSkip, Image, Pair, PairCandidate
from tests.collection_fixtures import levir_folder, mvtec_folder
from tests.conftest import browser_login, wait_until
from tests.similarity_fixtures import store_embedding, vector_with_similarity

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


def shot(page, name: str) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def author(page, *, category_key: str, question: str, expect_names: tuple[str, str]) -> Pair:
    """On the work page: ask for a candidate, check its two images are A and B, write a first/second-image
    question whose answer is image B, submit, and come back to the work page."""
    before = set(Pair.objects.values_list("pk", flat=True))
    page.locator("#ask-for-candidate").click()
    page.wait_for_url("**/work/candidates/*/")
    expect(page.locator("#similarity")).to_contain_text("0.930")  # A and B are set from the start
    config = json.loads(page.locator("#workbench-config").text_content())
    assert [frame["name"] for frame in config["frames"]] == list(expect_names)
    page.keyboard.press(f"Shift+{category_key}")
    page.keyboard.press("q")
    page.keyboard.type(question)
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+B")  # the answer is image B
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/work/")
    return wait_until(lambda: Pair.objects.exclude(pk__in=before).first(), 15, "the authored pair")


def test_pairs_of_two_collections_are_authored_reviewed_and_exported_with_their_regions(
    browser_pages, page, annotator, reviewer, tmp_path
):
    collection_import(source=str(levir_folder(tmp_path / "levir")), name="levir_cd", domain="aerial", sync=True)
    collection_import(source=str(mvtec_folder(tmp_path / "mvtec")), name="mvtec", domain="industrial", sync=True)
    # As the similarity worker would embed them: each candidate's image 2 at 0.93 from its image 1.
    base = np.ones(16)
    for image in Image.objects.all():
        store_embedding(image, base)
    for candidate in PairCandidate.objects.select_related("image_2"):
        store_embedding(candidate.image_2, vector_with_similarity(base, 0.93))
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(page, "alice")
    page.goto("/work/")
    expect(page.locator("#candidate-queue")).to_contain_text("5 candidate pairs from image collections")
    shot(page, "collections-work-1440")

    aerial = author(
        page,
        category_key="7",  # quantity
        question="In which image are there more buildings?",
        expect_names=("A/train_1.png", "B/train_1.png"),
    )
    # The next one (LEVIR train_2) is skipped with a reason, and the skip undone from the work page.
    page.locator("#ask-for-candidate").click()
    page.wait_for_url("**/work/candidates/*/")
    page.keyboard.press("x")
    page.locator("input[name=reason][value=no_difference]").check()
    page.locator("#skip-confirm").click()
    page.wait_for_url("**/work/")
    expect(page.locator("#candidate-skips")).to_contain_text("levir_cd/train_2")
    shot(page, "collections-work-skipped-1440")
    skip = CandidateSkip.objects.get()
    assert (skip.user, skip.candidate.source_id) == (annotator, "train_2")
    page.locator("#candidate-skips button").click()
    page.wait_for_url("**/work/")
    expect(page.locator("#candidate-queue")).to_contain_text("4 candidate pairs")
    assert not CandidateSkip.objects.exists()
    # train_2 is offered again first (the oldest open one); leave it untouched, and author the MVTec one next.
    page.locator("#ask-for-candidate").click()
    page.wait_for_url("**/work/candidates/*/")
    shot(page, "collections-workbench-1440")
    page.locator("#done-video").click()  # "Leave": the lease ends, the pair stays in the queue
    page.wait_for_url("**/work/")
    PairCandidate.objects.filter(source_id="train_2").update(status=PairCandidate.Status.DISMISSED)
    page.reload()
    industrial = author(
        page,
        category_key="2",  # state
        question="In which image is the bottle more damaged?",
        expect_names=("bottle/train/good/000.png", "bottle/test/broken_large/000.png"),
    )
    for pair, domain, source, region in (
        (aerial, "aerial", "levir_cd", {"x": 10, "y": 4, "w": 10, "h": 8}),
        (industrial, "industrial", "mvtec", {"x": 4, "y": 5, "w": 6, "h": 6}),
    ):
        assert (pair.status, pair.domain, pair.source, pair.author) == ("submitted", domain, source, annotator)
        assert pair.similarity == pytest.approx(0.93, abs=1e-3)
        # The defective (changed) image holds the region, wherever the balanced answer put it.
        changed = 1 if pair.swapped else 2
        assert pair.regions == [{"image": changed, **region}]
        assert pair.answer == ("first image" if pair.swapped else "second image")

    review = browser_pages.new_context(viewport={"width": 1440, "height": 900}).new_page()
    review.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(review, "rita")
    review.goto("/review/")
    review.click("#start-review")
    for pair in (aerial, industrial):  # oldest first; accepting one opens the next
        review.wait_for_url(f"**/review/pairs/{pair.pk}/")
        review.keyboard.press("y")
        wait_until(lambda pk=pair.pk: Pair.objects.get(pk=pk).status == "accepted", 15, "the pair to be accepted")

    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))
    records = [json.loads(line) for line in (tmp_path / "out/data/test.jsonl").read_text().splitlines()]
    sidecar = {
        line["item_id"]: line
        for line in map(json.loads, (tmp_path / "out/metadata/items.jsonl").read_text().splitlines())
    }
    by_source = {record["source"]: record for record in records}
    assert {(r["domain"], r["source_id"]) for r in records} == {
        ("aerial", "train_1"),
        ("industrial", "bottle_broken_large_000"),
    }
    for source, region in (("levir_cd", [10, 4, 10, 8]), ("mvtec", [4, 5, 6, 6])):
        record = by_source[source]
        line = sidecar[f"{record['category']}_{source}_{record['source_id']}"]
        (box,) = line["regions"]
        assert [box["x"], box["y"], box["w"], box["h"]] == region
        # The box is on the record's changed image: the second, unless the export traded them.
        assert box["image"] == (1 if record["answer"] == "first image" else 2)
    assert errors == []


def test_the_collections_page_imports_a_folder_and_shows_it(page, coordinator, tmp_path, settings):
    levir_folder(tmp_path / "levir")
    browser_login(page, "cora")
    page.goto("/collections/")
    page.fill("input[name=source]", str(tmp_path / "levir"))
    page.fill("input[name=name]", "levir_cd")
    page.select_option("select[name=domain]", "aerial")
    page.locator("#collection-import button.primary").click()
    page.wait_for_url("**/jobs/*/")
    job_page = page.url
    # No worker runs in this test: the page shows the queued job; run its unit here, as a worker would.
    from annotator.collections.services import collection_import_run
    from annotator.jobs.services import UnitRef
    from annotator.models import JobTask

    unit = JobTask.objects.get(name="annotator.tasks.import_collection")
    collection_import_run(**{k: v for k, v in unit.kwargs.items()}, unit=UnitRef(unit.pk, worker="test"))
    page.goto(job_page)
    expect(page.locator("main")).to_contain_text("Imported collection levir_cd (change_detection, aerial)")
    shot(page, "collections-job-1440")
    page.goto("/collections/")
    expect(page.locator("#collections")).to_contain_text("levir_cd")
    shot(page, "collections-list-1440")
