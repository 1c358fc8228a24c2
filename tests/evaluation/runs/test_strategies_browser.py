"""The run form's settings in a real Chromium (issue 28): a coordinator picks a strategy, a temperature and an
extraction model, replaces a prompt text, starts the run and reads the unparsable replies and the second figure on
the run page; screenshots at 1440x900 for the record (SCREENSHOT_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotator.llm.endpoints import endpoint_create
from evaluation.models import ModelEvaluation
from evaluation.runs.services import evaluation_run
from tests.conftest import browser_login
from tests.factories import make_pair
from tests.model_server import ModelServer
from tests.modeleval_release_factories import make_release

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


def shot(page, name: str) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_a_coordinator_runs_a_strategy_with_extraction_and_reads_both_figures(page, live_server, coordinator):
    pairs = [make_pair(category="temporal", answer=f"change {i}", distractors=["other"]) for i in range(6)]
    for pair in pairs[:2]:
        pair.question = f"What differs in pair {pair.pk}?"
        pair.save(update_fields=["question"])
    server = ModelServer(policy=lambda question, options: next(o for o in options if o != "other")).start()
    server.faults = {pairs[0].question: "malformed", pairs[1].question: "malformed"}
    release = make_release([(pair, "test", False) for pair in pairs])
    try:
        endpoint_create(user=coordinator, name="tiny-vlm", base_url=server.base_url, model_id="tiny-vlm")
        endpoint_create(user=coordinator, name="reader", base_url=server.base_url, model_id="tiny-vlm")
        browser_login(page, "cora")
        page.set_viewport_size({"width": 1440, "height": 900})
        page.goto("/models/runs/new/")
        page.select_option("#id_release", str(release.pk))
        page.select_option("#id_endpoint", label="tiny-vlm")
        page.select_option("#id_strategy", "overlapped")
        page.fill("#id_temperature", "0.2")
        page.select_option("#id_extraction_endpoint", label="reader")
        page.get_by_text("Prompt texts").click()
        page.fill("#id_system", "Compare the images closely.")
        shot(page, "run-form-strategy")
        page.get_by_role("button", name="Start run").click()
        page.wait_for_url("**/models/runs/*/")
        evaluation = ModelEvaluation.objects.get()
        evaluation_run(evaluation_id=evaluation.pk)
        page.reload()
        expect(page.locator("#run-strategy")).to_contain_text("overlapped")
        expect(page.locator("#run-strategy")).to_contain_text("0.2")
        expect(page.locator("#run-unparsable")).to_contain_text("2")
        # The extractor reads the right letter for both (the policy's choice): the second figure is 100%.
        expect(page.locator("#run-extraction")).to_contain_text("100%")
        expect(page.locator("#run-answered")).to_contain_text("67%")
        expect(page.locator("#run-items tbody tr")).to_have_count(2)
        page.get_by_text("Prompt texts, as sent").click()
        expect(page.locator("#run-prompt")).to_contain_text("Compare the images closely.")
        shot(page, "run-detail-strategy")
        page.locator("#run-items").get_by_role("link", name="all").click()
        expect(page.locator("#run-items tbody tr")).to_have_count(6)
        expect(page.locator("#run-items")).to_contain_text("right")
        shot(page, "run-detail-all-items")
    finally:
        server.stop()
    asked = [seen for seen in server.requests if seen.images]
    assert len(asked) == 6 and {len(seen.images) for seen in asked} == {3}
    assert {seen.body["temperature"] for seen in asked} == {0.2}
