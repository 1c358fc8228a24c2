"""The Content-Security-Policy in a real Chromium (issue 13): the main pages of an annotator, a coordinator and a
participant load and run their scripts with no CSP violation (no inline script, nothing from elsewhere)."""

from __future__ import annotations

import os

import pytest

from annotator.captions import services as captions
from annotator.models import Category, Pair
from evaluation.studies import services as studies
from tests.conftest import browser_login
from tests.factories import make_pair, make_video

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set SECURITY_SCREENSHOTS=/tmp/somewhere to keep a screenshot of each page for a look.
SHOTS = os.getenv("SECURITY_SCREENSHOTS", "")

# Runs before any page script and is not subject to the page's CSP: it records every violation the browser reports.
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`);
});
"""


class Watch:
    """Console messages about the CSP, script errors and reported violations of one page, across navigations."""

    def __init__(self, page):
        self.page = page
        self.problems: list[str] = []
        page.add_init_script(RECORD_VIOLATIONS)
        page.on("console", self.on_console)
        page.on("pageerror", lambda error: self.problems.append(f"script error: {error}"))

    def on_console(self, message):
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            self.problems.append(f"console: {message.text}")

    def visit(self, url: str, name: str) -> None:
        response = self.page.goto(url)
        assert response.status < 400, f"{url} answered {response.status}"
        assert "script-src 'self'" in response.headers["content-security-policy"]
        self.page.wait_for_load_state("networkidle")
        self.check(url)
        if SHOTS:
            self.page.screenshot(path=os.path.join(SHOTS, f"csp-{name}.png"), full_page=True)

    def check(self, where: str) -> None:
        reported = self.page.evaluate("window.__csp || []")
        problems, self.problems = self.problems + reported, []
        assert not problems, f"{where}: {problems}"


def test_the_watch_sees_a_violation(page, annotator):
    """The control: an inline script injected into a page is blocked, and the watch reports it."""
    watch = Watch(page)
    browser_login(page, "alice")
    page.goto("/")
    page.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = 'window.x = 1'; document.body.append(s); }"
    )
    page.wait_for_timeout(200)
    assert page.evaluate("window.x") is None  # blocked
    with pytest.raises(AssertionError, match="script-src"):
        watch.check("control")


def test_an_annotators_pages_load_with_no_csp_violation(page, annotator, coordinator):
    video = make_video(frames=6)
    accepted = make_pair(author=coordinator)
    captions.caption_batch_create(created_by=coordinator, title="t", selection="list", pair_ids=[accepted.pk])
    watch = Watch(page)
    browser_login(page, "alice")
    watch.check("login")
    for url, name in (("/", "home"), ("/work/", "work"), ("/jobs/", "jobs"), ("/account/tokens/", "tokens")):
        watch.visit(url, f"annotator-{name}")
    watch.visit(f"/work/videos/{video.pk}/", "annotator-workbench")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("a")
    page.wait_for_timeout(300)
    watch.check("the workbench, in use")
    watch.visit("/captions/work/", "annotator-captions")
    page.click("button.primary")  # ask for a caption task
    page.wait_for_url("**/captions/tasks/*/")
    page.wait_for_load_state("networkidle")
    watch.check("the caption workbench")
    watch.visit("/api/docs/", "annotator-api-docs")
    page.wait_for_selector(".swagger-ui .info")
    watch.check("swagger")


def test_a_coordinators_pages_load_with_no_csp_violation(page, coordinator, annotator):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    for _ in range(3):
        make_pair(category=Category.TEMPORAL)
    study = studies.study_create(name="CSP", fraction=1.0, practice_count=0)
    watch = Watch(page)
    browser_login(page, "cora")
    for url, name in (
        ("/videos/", "videos"),
        (f"/videos/{pair.video_id}/", "video"),
        ("/overview/", "overview"),
        ("/review/", "review-queue"),
        (f"/review/pairs/{pair.pk}/", "review"),
        ("/captions/", "captions"),
        ("/studies/", "studies"),
        (f"/studies/{study.pk}/", "study"),
        (f"/studies/{study.pk}/invites/", "invites"),
        ("/exports/", "exports"),
        ("/jobs/", "jobs"),
        ("/admin/", "admin"),
    ):
        watch.visit(url, f"coordinator-{name}")


def test_a_participants_pages_load_with_no_csp_violation(page, browser_pages):
    for _ in range(10):
        make_pair(category=Category.TEMPORAL)
    # The other half holds the practice; a phone-sized window is admitted (the study's minimum is 0).
    study = studies.study_create(name="CSP", fraction=0.5, practice_count=1, min_viewport_width=0)
    participant = studies.participant_create(study=study)
    context = browser_pages.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    watch = Watch(page)
    watch.visit(f"/p/{participant.token}/", "participant-start")
    page.check("input[name=agree]")
    page.click("#start")
    page.wait_for_selector("#answer-form")
    page.wait_for_load_state("networkidle")
    watch.check("practice")
    assert "/practice/" in page.url
    # The pair's two images (the full-screen viewer's own image has no source until it is opened).
    assert page.evaluate(
        "[...document.querySelectorAll('.p-images img')].every((img) => img.complete && img.naturalWidth > 0)"
    )
    with page.expect_navigation():
        page.keyboard.press("1")  # participant.js: keys choose an option
    watch.check("practice feedback")
    with page.expect_navigation():
        page.keyboard.press("Enter")  # participant.js: Enter follows the link
    watch.check("practice done")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("#answer-form")
    watch.check("scored item")
    active_ms = page.evaluate("document.querySelector('#answer-form').elements.active_ms.value")
    with page.expect_navigation():
        page.keyboard.press("1")
    assert active_ms == ""  # filled in only as the answer is sent
    assert participant.assignments.filter(answered_at__isnull=False, active_ms__gt=0).exists()
    watch.check("after the answer")
    context.close()
