"""Issue 14, parts 4-7 in a real Chromium: example questions are placeholders (valid when typed out), the A/B row
only for binary categories, a toast that outlives the autosave, the review URL following the pair, Enter in a
review field deciding nothing, and caption shortcuts that never type into the caption."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotator.captions import services as captions
from annotator.models import Pair
from annotator.picking import services as picking
from benchmark.taxonomy import EXAMPLE_QUESTIONS
from tests.conftest import browser_login
from tests.factories import make_pair, make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set SCREENSHOT_DIR to keep screenshots of the pages these tests open (the lead looks at them).
SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


def shot(page, name: str) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"))


def open_workbench(page, annotator, frames: int = 8):
    video = make_video(frames=frames)
    picking.video_lease_next(user=annotator)
    browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    for key in ("ArrowRight", "a", "ArrowRight", "ArrowRight", "b"):
        page.keyboard.press(key)
    return video


def test_an_example_question_is_a_placeholder_and_typed_out_it_is_submitted_with_a_toast(page, annotator):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    open_workbench(page, annotator)
    page.keyboard.press("Shift+1")  # attribute
    question = page.locator("#question")
    expect(question).to_have_value("")
    expect(question).to_have_attribute("placeholder", f"e.g. {EXAMPLE_QUESTIONS['attribute']}")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#errors")).to_contain_text("is only an example of an attribute question")
    expect(question).to_have_value("")

    # Typed out (other case, no question mark), the example is a valid question: the same rules as import.
    page.keyboard.press("q")
    page.keyboard.type("what changed about the MUG")
    page.locator("#answer").fill("red")
    page.locator("#distractors input").nth(0).fill("blue")
    page.locator("#distractors input").nth(1).fill("green")
    page.locator("#answer").press("Control+Enter")
    toast = page.locator("#toast")
    expect(toast).to_contain_text("Submitted pair")
    # The autosave status that follows writes its own element; the toast stays.
    expect(page.locator("#save-status")).to_have_text("Draft saved")
    expect(toast).to_be_visible()
    expect(toast).to_contain_text("Submitted pair")
    expect(question).to_have_value("")  # ready for the next pair: the example is a placeholder again
    expect(page.locator("#answer")).to_have_value("")
    assert Pair.objects.get().question == "what changed about the MUG"
    shot(page, "workbench-question-1440")
    page.set_viewport_size({"width": 1280, "height": 720})
    shot(page, "workbench-question-1280")
    assert errors == []


def test_the_answer_frame_row_shows_only_for_binary_categories_and_is_never_tabbed_to_when_hidden(page, annotator):
    open_workbench(page, annotator)
    row = page.locator("#binary-answer")
    page.keyboard.press("Shift+0")  # action: texts, no A/B
    expect(row).to_be_hidden()
    page.keyboard.press("q")
    visited = []
    for _ in range(12):
        page.keyboard.press("Tab")
        visited.append(page.evaluate("() => document.activeElement.closest('#binary-answer') !== null"))
    assert not any(visited), "Tab reached the hidden A/B row"
    page.evaluate("() => document.activeElement.blur()")
    page.keyboard.press("Shift+2")  # state: first image / second image
    expect(row).to_be_visible()
    expect(page.locator("#text-answer")).to_be_hidden()
    page.locator("#question").focus()
    page.keyboard.press("Tab")
    expect(page.locator("#binary-answer button[data-frame=a]")).to_be_focused()


def submitted_pairs(author, count: int, similarity: float = 0.93):
    return [
        make_pair(
            status="submitted",
            author=author,
            category="action",
            question=f"What did the cyclist do in take {n}?",
            answer="raised a hand",
            distractors=["sat down", "waved"],
            similarity=similarity,
        )
        for n in range(count)
    ]


def test_the_review_url_follows_the_pair_and_says_what_was_decided(page, annotator, reviewer):
    first, second = submitted_pairs(annotator, 2)
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{first.pk}/")
    page.keyboard.press("y")
    page.wait_for_url(f"**/review/pairs/{second.pk}/")
    expect(page.locator("#toast")).to_contain_text(f"Accepted pair {first.pk}.")
    expect(page.locator("h3").first).to_contain_text("take 1")
    page.reload()  # the address is the pair shown: a reload stays on it, and asks nothing
    expect(page.locator("h3").first).to_contain_text("take 1")
    first.refresh_from_db()
    assert first.status == "accepted"


def test_enter_in_a_review_field_decides_nothing_and_the_form_corrects_everything(page, annotator, reviewer):
    (pair,) = submitted_pairs(annotator, 1)
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{pair.pk}/")
    page.keyboard.press("n")
    page.locator("#reject-reason").type("Too blurry")
    page.keyboard.press("Enter")
    page.locator("#cancel-reject").click()
    page.keyboard.press("e")
    for field in ("#c-question", "#c-answer", "#c-category"):
        page.locator(field).focus()
        page.keyboard.press("Enter")
    page.locator(".c-distractor").first.press("Enter")
    page.wait_for_timeout(500)  # a decision would be on its way by now
    pair.refresh_from_db()
    assert (pair.status, pair.reviews.count()) == ("submitted", 0), "Enter in a field decided"
    expect(page).to_have_url(f"{page.url.split('/review/')[0]}/review/pairs/{pair.pk}/")

    # The form edits what the editor can: the category, the question, distractors added and removed.
    page.locator("#c-category").select_option("existence")
    page.locator("#c-question").fill("What appeared on the bench?")
    page.locator("#c-answer").fill("a bag")
    page.locator("#c-distractors [data-remove]").first.click()  # "sat down" goes
    page.locator("#c-add-distractor").click()
    page.locator(".c-distractor").last.fill("a hat")
    shot(page, "review-correction-1440")
    page.locator("#save-correction").click()
    page.wait_for_url("**/review/")
    pair.refresh_from_db()
    assert (pair.status, pair.category, pair.question) == ("accepted", "existence", "What appeared on the bench?")
    assert (pair.answer, pair.distractors) == ("a bag", ["waved", "a hat"])


def test_accept_is_disabled_with_the_reason_when_the_similarity_fails(page, annotator, reviewer):
    (pair,) = submitted_pairs(annotator, 1, similarity=0.5)
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{pair.pk}/")
    expect(page.locator("#accept")).to_be_disabled()
    expect(page.locator("#accept-off")).to_contain_text("the similarity is below the threshold")
    page.keyboard.press("y")
    page.wait_for_timeout(300)
    assert Pair.objects.get(pk=pair.pk).status == "submitted"
    shot(page, "review-accept-off-1440")


def test_caption_shortcuts_never_type_into_the_caption(page, annotator, coordinator):
    pair = make_pair()
    make_pair()  # a second pair to caption: "1 left for you" after this one
    captions.caption_batch_create(
        created_by=coordinator, title="keys", selection="list", pair_ids=list(Pair.objects.values_list("pk", flat=True))
    )
    browser_login(page, "alice")
    page.goto("/captions/work/")
    page.get_by_role("button", name="Start captioning").click()
    page.wait_for_url("**/captions/tasks/*/")
    box = page.locator("#caption-text")
    expect(box).not_to_be_focused()
    expect(page.locator("#left-for-you")).to_have_text("1 left for you")
    for key in ("f", "s", "+", "-", "=", "0", "y"):
        page.keyboard.press(key)
    expect(box).to_have_value("")
    expect(box).not_to_be_focused()
    page.keyboard.press("c")
    expect(box).to_be_focused()
    expect(box).to_have_value("")
    page.keyboard.type("The mug moved a little to the left in the second image.")
    box.blur()
    page.keyboard.press("f")
    expect(box).to_have_value("The mug moved a little to the left in the second image.")
    page.keyboard.press("Enter")
    expect(box).to_be_focused()
    shot(page, "caption-workbench-1440")
    assert pair.pk
