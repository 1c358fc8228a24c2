"""Pair picking in a real Chromium: keyboard picking to an accepted pair, a draft that survives a reload, and
one video at a time."""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import expect

from annotator.models import Pair, Video
from annotator.picking import services as picking
from tests.conftest import browser_login, wait_until
from tests.factories import make_pair, make_video
from tests.similarity_fixtures import store_embedding, vector_with_similarity

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_annotator_picks_with_the_keyboard_and_a_reviewer_accepts(browser_pages, page, annotator, reviewer):
    video = make_video(frames=12)
    frames = {frame.index: frame for frame in video.frames.select_related("image")}
    base = np.ones(16)
    store_embedding(frames[1].image, base)
    store_embedding(frames[10].image, vector_with_similarity(base, 0.93))
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "alice")
    page.goto("/work/")
    page.click("#ask-for-work")
    page.wait_for_url(f"**/work/videos/{video.pk}/")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("a")
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("b")
    page.keyboard.press("Shift+4")  # temporal
    expect(page.locator("#where-a")).to_contain_text("#1 ")
    expect(page.locator("#where-b")).to_contain_text("#10 ")
    expect(page.locator("#similarity")).to_contain_text("0.93")
    expect(page.locator("#question")).to_have_value("Which image was taken later?")
    page.keyboard.press("Control+Enter")
    pair = wait_until(lambda: Pair.objects.filter(status="submitted").first(), 15, "the submitted pair")
    expect(page.locator("#pairs")).to_contain_text("submitted")
    assert {pair.image_1.frame.index, pair.image_2.frame.index} == {1, 10}
    assert (pair.author, pair.category, pair.source_id.startswith(video.yt8m_id)) == (annotator, "temporal", True)
    assert pair.similarity == pytest.approx(0.93, abs=1e-3)  # scored at submit from the stored embeddings

    context = browser_pages.new_context(viewport={"width": 1440, "height": 900})
    review = context.new_page()
    review.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(review, "rita")
    review.goto("/review/")
    review.click("#start-review")
    review.wait_for_url(f"**/review/pairs/{pair.pk}/")
    review.keyboard.press("y")
    wait_until(lambda: Pair.objects.get(pk=pair.pk).status == "accepted", 15, "the pair to be accepted")
    assert pair.reviews.get().reviewer == reviewer
    context.close()
    assert script_errors == []


def test_the_review_page_zooms_both_images_together_and_flickers(page, annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{pair.pk}/")
    first = page.locator("#img-a").get_attribute("src")
    expect(page.locator("[data-cmp=readout]")).to_contain_text("fit")
    fitted = page.locator("#img-a").bounding_box()["width"]
    page.keyboard.press("+")
    page.keyboard.press("+")
    for image in ("#img-a", "#img-b"):
        assert page.locator(image).bounding_box()["width"] == pytest.approx(fitted * 1.5625, abs=0.5)
    page.locator("#img-b").hover()
    page.mouse.wheel(0, -100)
    for image in ("#img-a", "#img-b"):
        wanted = fitted * 1.5625 * 1.25
        wait_until(lambda: abs(page.locator(image).bounding_box()["width"] - wanted) < 0.5, 5, f"{image} zoomed")  # noqa: B023
    page.keyboard.press("z")
    expect(page.locator("[data-cmp=readout]")).to_contain_text("fit")
    assert page.locator("#img-a").bounding_box()["width"] == pytest.approx(fitted, abs=0.5)
    page.keyboard.down("f")
    expect(page.locator("#img-a")).to_have_attribute("src", page.locator("#img-b").get_attribute("src"))
    assert page.locator("#img-b").get_attribute("src") != first
    expect(page.locator("#viewer-a .cmp-badge")).to_have_text("2")
    page.keyboard.up("f")
    expect(page.locator("#img-a")).to_have_attribute("src", first)
    expect(page.locator("#viewer-a .cmp-badge")).to_have_text("1")
    assert script_errors == []


def test_the_editor_shows_only_the_answer_control_of_the_chosen_category(page, annotator):
    video = make_video(frames=4)
    picking.video_lease_next(user=annotator)
    browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    page.keyboard.press("Shift+9")  # viewpoint: the answer and distractors are texts
    expect(page.locator("#text-answer")).to_be_visible()
    expect(page.locator("#binary-answer")).to_be_hidden()
    page.keyboard.press("Shift+4")  # temporal: the answer is frame A or B
    expect(page.locator("#binary-answer")).to_be_visible()
    expect(page.locator("#text-answer")).to_be_hidden()


def test_a_second_videos_workbench_names_the_held_video_and_takes_nothing(page, annotator):
    held = make_video(frames=4, yt8m_id="held-one")
    other = make_video(frames=4)
    picking.video_heartbeat(video=held, user=annotator)
    script_errors, heartbeats = [], []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.on("request", lambda request: heartbeats.append(request.url) if "/heartbeat/" in request.url else None)
    browser_login(page, "alice")
    page.goto(f"/work/videos/{other.pk}/")
    expect(page.locator("#lease-conflict")).to_contain_text("You hold video held-one: release it or finish it first")
    expect(page.locator("#lease-status")).to_have_text("you hold held-one")
    page.wait_for_load_state("networkidle")
    assert heartbeats == []
    assert Video.objects.get(pk=other.pk).lease_holder is None
    page.click("#lease-conflict a")
    page.wait_for_url(f"**/work/videos/{held.pk}/")
    expect(page.locator("#lease-status")).to_have_text("lease: yours")
    assert page.locator("#lease-conflict").count() == 0
    assert script_errors == []
