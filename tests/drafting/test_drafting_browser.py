"""Models that draft, in a real Chromium against the loopback model server: draft with a model (the m key), edit the
question, see "k of n models wrong", submit; the pair shows it was drafted and what was changed. Discarding a draft
puts the texts from before back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotator.drafting import services as drafting
from annotator.llm.endpoints import endpoint_create
from annotator.models import ModelDraft, Pair
from annotator.picking import services as picking
from tests.conftest import browser_login, wait_until
from tests.factories import make_video
from tests.model_server import ModelServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set SCREENSHOT_DIR to keep screenshots of the pages these tests open (the lead looks at them).
SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


def shot(page, name: str, full_page: bool = False) -> None:
    if SHOTS:
        page.screenshot(path=str(SHOTS / name), full_page=full_page)


@pytest.fixture
def servers():
    """A drafter, and a background answerer taken in by a distractor that says "deep" (the drafted answer else)."""

    def answer(question, options):
        return next((option for option in options if "deep" in option), "it turned red")

    drafter = ModelServer().start()
    answerer = ModelServer(policy=answer).start()
    yield drafter, answerer
    drafter.stop()
    answerer.stop()


def test_draft_with_a_model_edit_submit_and_the_pair_shows_what_changed(
    browser_pages, page, servers, annotator, reviewer, coordinator
):
    drafter_server, answerer_server = servers
    drafter = endpoint_create(user=coordinator, name="gpt-draft", base_url=drafter_server.base_url, model_id="tiny-vlm")
    answerer = endpoint_create(
        user=coordinator, name="vlm-long", base_url=answerer_server.base_url, model_id="tiny-vlm"
    )
    drafting.drafting_settings_update(
        user=coordinator, drafting=[drafter.pk], default=drafter.pk, background=[answerer.pk]
    )
    video = make_video(frames=6)
    picking.video_heartbeat(video=video, user=annotator)
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("a")
    page.keyboard.press("End")
    page.keyboard.press("b")
    page.keyboard.press("Shift+1")  # attribute
    page.keyboard.press("g")
    expect(page.locator("#question")).to_have_value("What changed about the mug (attribute)?", timeout=15000)
    expect(page.locator("#answer")).to_have_value("it turned red")
    expect(page.locator("#draft-status")).to_contain_text("Draft from gpt-draft")
    expect(page.locator("#draft-record")).to_contain_text("unchanged so far")
    # The background answerer gets the draft right, and falls for the distractor the annotator writes.
    expect(page.locator("#model-answers-text")).to_have_text("0 of 1 model wrong", timeout=15000)
    page.locator("#question").fill("What changed about the mug on the table?")
    page.locator("#distractors input").nth(0).fill("it turned a deep shade of blue")
    expect(page.locator("#draft-record")).to_contain_text("you changed: question, distractors")
    expect(page.locator("#model-answers-text")).to_have_text("1 of 1 model wrong", timeout=15000)
    expect(page.locator("#model-answers-list")).to_contain_text(
        "vlm-long: wrong, chose “it turned a deep shade of blue”"
    )
    shot(page, "drafting-workbench.png", full_page=True)
    page.locator("#question").press("Control+Enter")
    pair = wait_until(lambda: Pair.objects.filter(status="submitted").first(), 15, "the submitted pair")
    expect(page.locator("#pairs")).to_contain_text("model-drafted")
    draft = ModelDraft.objects.get()
    assert pair.drafted_by_id == draft.pk and draft.endpoint_name == "gpt-draft"
    assert {name: entry["change"] for name, entry in pair.draft_changes.items()} == {
        "question": "edited",
        "answer": "unchanged",
        "distractors": "edited",
    }
    assert pair.question == "What changed about the mug on the table?"
    # The drafter saw frames #1 and #5 (A first); the answerer saw the question as typed, never the answer key.
    (drafted,) = drafter_server.requests
    assert drafted.draft_category == "attribute"
    asked = [seen.question for seen in answerer_server.requests]
    assert asked[-1] == "What changed about the mug on the table?"
    assert all("it turned red" not in seen.text.split("Options:")[0] for seen in answerer_server.requests)

    review = browser_pages.new_page()
    review.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(review, "rita")
    review.goto(f"/review/pairs/{pair.pk}/")
    record = review.locator("#draft-record")
    expect(record).to_contain_text("Model-drafted by gpt-draft (tiny-vlm)")
    expect(record.locator("tr[data-field=question]")).to_contain_text("edited")
    expect(record.locator("tr[data-field=question]")).to_contain_text("What changed about the mug (attribute)?")
    expect(record.locator("tr[data-field=answer]")).to_contain_text("unchanged")
    expect(record.locator("tr[data-field=distractors]")).to_contain_text("it turned a deep shade of blue")
    shot(review, "drafting-pair-record.png")

    team = browser_pages.new_page()
    team.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(team, "cora")
    team.goto("/stats/")
    expect(team.locator("#drafting-edits")).to_contain_text("Of 1 submitted model-drafted pair, 0 went in as drafted.")
    expect(team.locator("#drafting-edits")).to_contain_text("question: 1 edited, 0 replaced")
    team.locator("#drafting-stats").scroll_into_view_if_needed()
    shot(team, "drafting-stats.png")
    team.goto("/models/")
    expect(team.locator(f"#drafting-settings input[name=default][value='{drafter.pk}']")).to_be_checked()
    expect(team.locator(f"#drafting-settings input[name=background][value='{answerer.pk}']")).to_be_checked()
    shot(team, "drafting-models.png", full_page=True)
    assert script_errors == []


def test_discarding_a_draft_puts_the_texts_from_before_back(page, annotator, coordinator, servers):
    drafter_server, _ = servers
    drafter = endpoint_create(user=coordinator, name="gpt-draft", base_url=drafter_server.base_url, model_id="tiny-vlm")
    drafting.drafting_settings_update(user=coordinator, drafting=[drafter.pk], default=drafter.pk, background=[])
    drafter_server.draft_reply = lambda category: "no JSON here"
    video = make_video(frames=4)
    picking.video_heartbeat(video=video, user=annotator)
    browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    page.keyboard.press("a")
    page.keyboard.press("End")
    page.keyboard.press("b")
    page.keyboard.press("Shift+6")  # existence
    page.locator("#question").fill("What was added in the second image?")
    page.locator("#question").press("Escape")
    asked = []  # g (or the button) asks before replacing a typed question: the first time the answer is no

    def answer(dialog):
        asked.append(dialog.message)
        dialog.dismiss() if len(asked) == 1 else dialog.accept()

    page.on("dialog", answer)
    page.click("#draft-model")
    expect(page.locator("#draft-status")).to_contain_text("Kept your question: nothing was asked of the model.")
    assert asked == [
        "Replace your question “What was added in the second image?” with a model's draft? "
        "(Discard draft brings it back.)"
    ]
    assert ModelDraft.objects.count() == 0
    page.click("#draft-model")
    expect(page.locator("#draft-status")).to_contain_text("holds no JSON object: 'no JSON here'", timeout=15000)
    expect(page.locator("#question")).to_have_value("What was added in the second image?")
    drafter_server.draft_reply = lambda category: (
        '{"question": "What appeared?", "answer": "a cat", "distractors": ["a dog", "a hat", "a cup"]}'
    )
    page.click("#draft-model")
    expect(page.locator("#question")).to_have_value("What appeared?", timeout=15000)
    page.click("#draft-discard")
    expect(page.locator("#question")).to_have_value("What was added in the second image?")
    expect(page.locator("#draft-record")).to_be_hidden()
    wait_until(lambda: ModelDraft.objects.count() == 2, 5, "both drafts on record")
