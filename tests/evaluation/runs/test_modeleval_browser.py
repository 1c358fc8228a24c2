"""The /models/ pages in a real Chromium: register a model with the form, start a run, watch it progress (htmx
polling) to its end with failures counted; screenshots at 1440x900 for the record (SCREENSHOT_DIR)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from evaluation.models import ModelEvaluation
from evaluation.runs.services import evaluation_run
from tests.conftest import browser_login
from tests.factories import make_pair
from tests.model_server import ModelServer
from tests.modeleval_fixtures import bind_key
from tests.modeleval_release_factories import make_release

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ.get("SCREENSHOT_DIR", "")) if os.environ.get("SCREENSHOT_DIR") else None


def shot(page, name: str) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_a_coordinator_registers_a_model_starts_a_run_and_watches_it_finish(page, live_server, coordinator, settings):
    # Retries of the failing items after waits of hundredths of a second, not of seconds (as in test_modeleval.py):
    # what this test checks is the page, and the run still takes several seconds with the server's latency.
    settings.MODEL_EVAL_BACKOFF_SECONDS = 0.01
    settings.MODEL_EVAL_BACKOFF_MAX_SECONDS = 0.05
    categories = ["temporal", "spatial", "attribute", "viewpoint"]
    pairs = [make_pair(category=categories[i % 4], answer=f"change {i}", distractors=["other"]) for i in range(24)]
    server = ModelServer(latency=0.4).start()
    bind_key(settings, "SUBTLEBENCH_MODEL_KEY_TINY", server.base_url)
    for pair in pairs[:3]:
        pair.question = f"What differs in pair {pair.pk}?"
        pair.save(update_fields=["question"])
    server.faults = {pairs[0].question: "malformed", pairs[1].question: "500", pairs[2].question: "timeout"}
    release = make_release([(pair, "test", False) for pair in pairs])
    server.hang_seconds = 3
    try:
        browser_login(page, "cora")
        page.goto("/models/")
        expect(page.get_by_text("No model registered yet.")).to_be_visible()
        shot(page, "models-empty")
        page.get_by_role("link", name="Register a model").click()
        page.fill("input[name=name]", "tiny-vlm")
        page.fill("input[name=base_url]", "http://me:secret@127.0.0.1/v1")
        page.fill("input[name=model_id]", "tiny-vlm")
        page.select_option("select[name=api_key_env]", "SUBTLEBENCH_MODEL_KEY_TINY")
        page.fill("input[name=concurrency]", "2")
        page.fill("input[name=timeout_s]", "1")
        page.get_by_role("button", name="Register").click()
        expect(page.get_by_text("No user or password in the URL")).to_be_visible()
        shot(page, "endpoint-form-error")
        page.fill("input[name=base_url]", server.base_url)
        page.select_option("select[name=api_key_env]", "")
        page.get_by_role("button", name="Register").click()
        expect(page.locator("#model-endpoints")).to_contain_text(server.base_url)

        page.get_by_role("link", name="Start a run").click()
        page.select_option("#id_release", str(release.pk))
        shot(page, "run-form")
        # The run is queued after the commit; this test's own thread runs it (no worker in this test).
        page.get_by_role("button", name="Start run").click()
        page.wait_for_url("**/models/runs/*/")
        evaluation = ModelEvaluation.objects.get()
        runner = threading.Thread(target=evaluation_run, kwargs={"evaluation_id": evaluation.pk})
        runner.start()
        expect(page.locator("#run-status .badge").first).to_have_text("running", timeout=20000)
        expect(page.locator("#run-failures")).to_be_visible(timeout=20000)
        shot(page, "run-running")
        runner.join(timeout=60)
        expect(page.locator("#run-status .badge").first).to_have_text("incomplete", timeout=20000)
        status = page.locator("#run-status")
        # A reply without a letter is an answer, unparsable and wrong, shown raw; not a failure.
        expect(page.locator("#run-unparsable")).to_contain_text("1")
        expect(page.locator("#run-items")).to_contain_text("I cannot tell which option is right.")
        expect(status).to_contain_text("server error 1")
        expect(status).to_contain_text("timeout 1")
        expect(page.get_by_role("link", name="Download results file")).to_be_visible()
        shot(page, "run-finished")
        page.goto("/models/")
        expect(page.locator("#model-runs")).to_contain_text("incomplete")
        shot(page, "models-list")
    finally:
        server.stop()
