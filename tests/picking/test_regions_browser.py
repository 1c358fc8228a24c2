"""Difference regions in a real Chromium: one box drawn with the keyboard and one with the mouse on the workbench,
kept over a reload (the draft), submitted onto the right images of a swapped pair, shown in review and corrected
there by a reviewer."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

from annotator.models import Pair, Review
from tests.conftest import browser_login, wait_until
from tests.factories import make_video
from tests.similarity_fixtures import store_embedding, vector_with_similarity

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Where to write the pages' screenshots when someone wants to look at them (not needed by the test).
SHOTS = os.environ.get("REGIONS_SCREENSHOTS", "")


def shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


def at_pixel(page, image: str, x: float, y: float) -> tuple[float, float]:
    """The page position of pixel (x, y) of the image as shown (scaled to fit the viewer)."""
    box = page.locator(image).bounding_box()
    width, height = page.locator(image).evaluate("img => [img.naturalWidth, img.naturalHeight]")
    return box["x"] + x * box["width"] / width, box["y"] + y * box["height"] / height


def test_boxes_drawn_with_keys_and_mouse_reach_the_pair_and_the_reviewer_corrects_them(
    browser_pages, page, annotator, reviewer
):
    video = make_video(frames=6)  # frames of 160×120
    frames = {frame.index: frame for frame in video.frames.select_related("image")}
    base = np.ones(16)
    store_embedding(frames[0].image, base)
    store_embedding(frames[3].image, vector_with_similarity(base, 0.93))  # subtle: the reviewer may accept
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "alice")
    page.goto("/work/")
    page.click("#ask-for-work")
    page.wait_for_url(f"**/work/videos/{video.pk}/")
    page.keyboard.press("a")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("b")
    page.keyboard.press("Shift+8")  # quality: a first-or-second-image question
    page.keyboard.press("q")
    page.keyboard.type("Which image of the street is sharper?")
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+B")  # the answer is frame B

    # Keyboard: r puts a box on A (a quarter of the frame, centred: 40×30 at 60,45); arrows move it by 1/100 of the
    # frame (2 px across, 1 px down), Shift+arrows resize it.
    page.keyboard.press("r")
    expect(page.locator("#viewer-a .rg-box")).to_have_count(1)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Shift+ArrowDown")
    page.keyboard.press("Shift+ArrowRight")
    expect(page.locator("[data-rg-list]")).to_have_text("A#1 64,45 42×31")
    # The arrows moved the box, not the frame cursor: B is still frame #3.
    expect(page.locator("#where-b")).to_contain_text("#3 ")

    # Mouse: m turns drawing on, a drag on B draws a box there.
    page.keyboard.press("m")
    page.mouse.move(*at_pixel(page, "#img-b", 16.3, 12.3))
    page.mouse.down()
    page.mouse.move(*at_pixel(page, "#img-b", 50.3, 40.3), steps=4)
    page.mouse.move(*at_pixel(page, "#img-b", 80.3, 72.3), steps=4)
    page.mouse.up()
    expect(page.locator("#viewer-b .rg-box")).to_have_count(1)
    expect(page.locator("[data-rg-list]")).to_have_text("A#1 64,45 42×31B#1 16,12 64×60")
    # A stray box, drawn and undone with Ctrl+Z.
    page.mouse.move(*at_pixel(page, "#img-a", 5.3, 5.3))
    page.mouse.down()
    page.mouse.move(*at_pixel(page, "#img-a", 30.3, 30.3), steps=4)
    page.mouse.up()
    expect(page.locator(".rg-item")).to_have_count(3)
    page.keyboard.press("Control+z")
    expect(page.locator(".rg-item")).to_have_count(2)
    shot(page, "workbench-regions")

    # The boxes travel with the draft: a reload brings them back.
    wait_until(lambda: page.locator("#save-status").text_content() == "Draft saved", 15, "the draft to be saved")
    page.reload()
    expect(page.locator("[data-rg-list]")).to_have_text("A#1 64,45 42×31B#1 16,12 64×60")

    page.keyboard.press("Control+Enter")
    pair = wait_until(lambda: Pair.objects.filter(status="submitted").first(), 15, "the submitted pair")
    # The first quality pair has its answer first: frame B became image 1, and its box went with it.
    assert pair.swapped is True
    assert pair.image_1.frame.index == 3
    assert pair.regions == [
        {"image": 2, "x": 64, "y": 45, "w": 42, "h": 31},
        {"image": 1, "x": 16, "y": 12, "w": 64, "h": 60},
    ]
    expect(page.locator(".rg-box")).to_have_count(0)  # a fresh pair starts without boxes

    review = browser_pages.new_page()
    review.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(review, "rita")
    review.goto(f"/review/pairs/{pair.pk}/")
    expect(review.locator("#viewer-a .rg-box")).to_have_count(1)  # image 1: the box drawn on B
    expect(review.locator("#viewer-b .rg-box")).to_have_count(1)
    expect(review.locator("[data-rg-list]")).to_have_text("2#1 64,45 42×311#1 16,12 64×60")
    shot(review, "review-regions")
    # The reviewer takes the box off image 1 and accepts: a correction, recorded.
    review.locator("#viewer-a .rg-box").click()
    review.keyboard.press("Delete")
    expect(review.locator("#regions-changed")).to_be_visible()
    review.keyboard.press("y")
    wait_until(lambda: Pair.objects.get(pk=pair.pk).status == "accepted", 15, "the corrected pair")
    pair.refresh_from_db()
    assert pair.regions == [{"image": 2, "x": 64, "y": 45, "w": 42, "h": 31}]
    correction = Review.objects.get(pair=pair)
    assert (correction.decision, correction.reviewer) == ("correct", reviewer)
    assert correction.changes["regions"]["new"] == pair.regions
    assert script_errors == []
