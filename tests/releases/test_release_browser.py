"""The release page in a real browser at 1440x900: the counts, the diff and the card fit the window (nothing runs
off to the side), and the card opens. RELEASE_SCREENSHOT=<file.png> saves what it looked like."""

from __future__ import annotations

import os

import pytest
from django.core.management import call_command

from annotator.models import Pair
from annotator.picking.services import pair_reopen, pair_review
from tests.conftest import browser_login
from tests.export_fixtures import make_pair, video_with_pairs

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = {
    "attribute": ("Which colour did the cup turn?", "red", ["blue", "green"]),
    "quantity": ("In which image are there more people?", "second image", ["first image"]),
    "state": ("In which image is the door open?", "first image", ["second image"]),
    "existence": ("What was added on the shelf?", "a vase", ["a book", "a lamp", "a cup"]),
}


def publish(out, *extra) -> None:
    call_command("export_benchmark", "--out", str(out), "--reproducible", "--val-fraction", "0.3", "--release", *extra)


def test_the_release_page_fits_the_window_and_opens_its_card(page, coordinator, tmp_path):
    pairs = []
    for category, domain in [(c, d) for c in QUESTIONS for d in ("natural", "gaming", "aerial", "industrial")] * 2:
        question, answer, distractors = QUESTIONS[category]
        pairs.append(
            make_pair(category=category, domain=domain, question=question, answer=answer, distractors=distractors)
        )
    pairs += video_with_pairs(4, category="temporal")
    publish(tmp_path / "v1", "--release-title", "Pilot")
    corrected = pairs[0]
    pair_reopen(pair=corrected, by=coordinator, reason="Wording.")
    corrected.refresh_from_db()
    pair_review(
        pair=corrected, reviewer=coordinator, decision="correct", version=corrected.version,
        corrections={"question": "What colour is the cup now?", "answer": "orange"},
    )  # fmt: skip
    Pair.objects.filter(pk__in=[pairs[5].pk, pairs[9].pk]).update(status=Pair.Status.REJECTED)
    make_pair(
        category="attribute",
        domain="medical",
        question="Which colour did the cup turn?",
        answer="red",
        distractors=["blue"],
    )
    publish(
        tmp_path / "v2", "--release-title", "Spring cut", "--release-notes", "Two pairs rejected after a second review."
    )

    browser_login(page, coordinator.username)
    page.goto("/releases/v2/")
    assert page.locator("h1").inner_text() == "v2 · Spring cut"
    assert page.locator("#release-counts tfoot th").first.inner_text().lower() == "all"
    assert "What colour is the cup now?" in page.locator("#release-changed").inner_text()
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the page runs {overflow}px off to the side"
    page.locator("#release-card summary").click()
    assert page.locator("#release-card pre").is_visible()
    page.locator("#release-card summary").click()
    if os.environ.get("RELEASE_SCREENSHOT"):
        page.screenshot(path=os.environ["RELEASE_SCREENSHOT"], full_page=True)
