"""The one pair editor in a real Chromium, for every source of pairs: a video's frames, an MVTec-AD-shaped collection,
a change-detection collection and a pair list. On each: draft with a model (the loopback model server), see the item's
own boxes (a mask's), be refused without a box where the category requires one, draw a box, submit; after a reload
the same editor reopens the pair with its boxes, a reviewer accepts it, and the export's provenance sidecar has them."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

from annotator.collections import authoring
from annotator.collections.services import collection_import
from annotator.drafting.services import drafting_settings_update
from annotator.export.services import ExportOptions, benchmark_export
from annotator.llm.endpoints import endpoint_create
from annotator.models import Image, Pair, PairCandidate, TeamSettings
from annotator.picking import services as picking
from tests.collection_fixtures import levir_folder, mvtec_folder, pair_list
from tests.conftest import browser_login, wait_until
from tests.factories import make_video
from tests.model_server import ModelServer
from tests.similarity_fixtures import store_embedding, vector_with_similarity

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set SCREENSHOT_DIR to keep screenshots of the editor on each source (the lead looks at them).
SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


@dataclass
class Item:
    """A work item opened in the editor: its page, its two images (A, B), where the page is after a submit, the keys
    that set A and B (a video's frames; a candidate pair's are set from the start) and its own boxes as the editor
    lists them."""

    url: str
    images: tuple[Image, Image]
    after_submit: str
    keys: tuple[str, ...] = ()
    own_boxes: tuple[str, ...] = ()


def video(tmp_path, annotator) -> Item:
    made = make_video(frames=6)  # frames of 160×120
    picking.video_heartbeat(video=made, user=annotator)
    frames = {frame.index: frame.image for frame in made.frames.select_related("image")}
    url = f"/work/videos/{made.pk}/"
    return Item(url, (frames[0], frames[5]), after_submit=url, keys=("a", "End", "b"))


def candidate(source_id: str, *, layout_folder, own_boxes=()):
    """A candidate pair of a collection imported from the folder `layout_folder(root)` makes (images of 48×32)."""

    def make(tmp_path, annotator) -> Item:
        collection_import(source=str(layout_folder(tmp_path / "collection")), name="col", domain="natural", sync=True)
        made = PairCandidate.objects.select_related("image_1", "image_2").get(source_id=source_id)
        authoring.candidate_heartbeat(candidate=made, user=annotator)
        # One pair is authored of a candidate pair: after it, the page is the work page's, which offers the next.
        url = f"/work/candidates/{made.pk}/"
        return Item(url, (made.image_1, made.image_2), after_submit="/work/", own_boxes=own_boxes)

    return make


SOURCES = {
    "video": video,
    "mvtec": candidate("bottle_broken_large_000", layout_folder=mvtec_folder, own_boxes=("B#1 4,5 6×6",)),
    "change_detection": candidate("train_1", layout_folder=levir_folder, own_boxes=("B#1 10,4 10×8",)),
    "pair_list": candidate("before_after", layout_folder=pair_list),
}


@pytest.fixture(scope="module")
def model_server():
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def drafter(model_server, coordinator):
    endpoint = endpoint_create(user=coordinator, name="gpt-draft", base_url=model_server.base_url, model_id="tiny-vlm")
    drafting_settings_update(user=coordinator, drafting=[endpoint.pk], default=endpoint.pk, background=[])
    return endpoint


@pytest.mark.parametrize("source", SOURCES)
def test_every_source_drafts_draws_submits_reopens_reviews_and_exports_through_the_one_editor(
    source, browser_pages, page, drafter, annotator, reviewer, tmp_path
):
    item = SOURCES[source](tmp_path, annotator)
    TeamSettings.objects.create(pk=1, regions_required=["existence"])
    base = np.ones(16)  # as the similarity worker would embed them: subtle, so the reviewer may accept
    store_embedding(item.images[0], base)
    store_embedding(item.images[1], vector_with_similarity(base, 0.93))
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(page, "alice")
    page.goto(item.url)
    page.wait_for_function("['img-a', 'img-b'].every((id) => document.getElementById(id).naturalWidth > 0)")
    for key in item.keys:
        page.keyboard.press(key)
    expect(page.locator(".rg-item")).to_have_text(list(item.own_boxes))
    page.keyboard.press("Shift+6")  # existence: the team requires a box
    page.keyboard.press("g")
    expect(page.locator("#question")).to_have_value("What changed about the mug (existence)?")
    expect(page.locator("#draft-record")).to_contain_text("Model draft from gpt-draft")
    if not item.own_boxes:
        expect(page.locator("#regions-required")).to_be_visible()
        page.keyboard.press("Control+Enter")
        expect(page.locator("#errors")).to_contain_text("An existence pair needs at least one difference region")
    page.keyboard.press("r")  # a box on A: a quarter of the image, centred
    width, height = item.images[0].width, item.images[0].height
    drawn = {"image": 1, "x": (width - width // 4) // 2, "y": (height - height // 4) // 2, "w": width // 4}
    drawn["h"] = height // 4
    expect(page.locator(".rg-item")).to_have_count(len(item.own_boxes) + 1)
    expect(page.locator("#regions-required")).to_be_hidden()
    if SHOTS:
        page.screenshot(path=str(SHOTS / f"editor-{source}-1440.png"))
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"**{item.after_submit}")
    pair = wait_until(lambda: Pair.objects.filter(status="submitted").first(), 15, "the submitted pair")
    expected = [*own_regions(item), drawn]
    assert (pair.image_1, pair.image_2, pair.regions) == (*item.images, expected)
    assert pair.drafted_by.endpoint_name == "gpt-draft" and pair.draft_changes["question"]["change"] == "unchanged"

    # The same editor, reloaded, lists the pair and reopens it with its boxes.
    page.goto(item.url)
    pairs = page.locator("#pairs")
    expect(pairs).to_contain_text("model-drafted")
    pairs.get_by_role("button", name="edit").click()
    expect(page.locator(".rg-item")).to_have_count(len(expected))
    expect(page.locator("#editing-note")).to_have_text(f"editing pair {pair.pk} (version 1)")
    if SHOTS:
        page.screenshot(path=str(SHOTS / f"editor-{source}-reopened-1440.png"), full_page=True)

    review = browser_pages.new_page()
    review.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(review, "rita")
    review.goto(f"/review/pairs/{pair.pk}/")
    expect(review.locator("#draft-record")).to_contain_text("Model-drafted by gpt-draft (tiny-vlm)")
    expect(review.locator(".rg-item")).to_have_count(len(expected))
    review.keyboard.press("y")
    wait_until(lambda: Pair.objects.get(pk=pair.pk).status == "accepted", 15, "the pair to be accepted")

    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))
    (line,) = map(json.loads, (tmp_path / "out/metadata/items.jsonl").read_text().splitlines())
    assert line["regions"] == expected
    assert errors == []


def own_regions(item: Item) -> list[dict]:
    """The item's own boxes as stored (a candidate pair's, from its mask): on image 2 in these collections."""
    candidate = PairCandidate.objects.filter(image_1=item.images[0], image_2=item.images[1]).first()
    return list(candidate.regions) if candidate else []
