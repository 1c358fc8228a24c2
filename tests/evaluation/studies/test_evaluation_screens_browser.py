"""Participants on any screen, in real Chromium (issue 12): a phone at 390×844 (and turned), a desktop at
1440×900, the window check before consent, the end page, and the dashboard that refreshes itself."""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import expect

from annotator.models import Category, Domain
from evaluation.models import Assignment, Participant
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.conftest import browser_login
from tests.factories import make_image, make_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set EVALUATION_SCREENSHOTS=/tmp/somewhere to keep screenshots of each page for a look.
SHOTS = os.getenv("EVALUATION_SCREENSHOTS", "")
# iPadOS Safari sends a desktop user agent; its touch screen and size make it a tablet.
TABLET_UA = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.0 Safari/605.1.15"
)
PHONE_UA = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.0 Mobile/15E148 Safari/604.1"
)


def shot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"screens-{name}.png"), full_page=True)


def make_study(image_size=None, **fields):
    """A small study; `image_size` gives every pair images of that (width, height) instead of 160×120."""
    for i in range(8):
        pair = make_pair(
            category=[Category.TEMPORAL, Category.STATE][i % 2],
            domain=Domain.NATURAL,
            question="In which image is the orange peeled more?" if i % 2 else "Which image was taken later?",
            answer="second image",
            distractors=["first image", "neither image", "both images equally"] if i % 2 else ["first image"],
        )
        if image_size:
            pair.image_1, pair.image_2 = make_image(size=image_size), make_image(shift=2, size=image_size)
            pair.save(update_fields=["image_1", "image_2"])
    return studies.study_create(name="Screens", fraction=0.25, practice_count=1, **fields)


def phone(browser_pages, user_agent: str = PHONE_UA, **options):
    """A touch screen of 390×844 CSS px (a phone, or with a tablet's user agent a tablet in split view)."""
    context = browser_pages.new_context(
        viewport={"width": 390, "height": 844},
        device_scale_factor=3,
        is_mobile=True,
        has_touch=True,
        user_agent=user_agent,
        **options,
    )
    context.set_default_timeout(15000)
    return context, context.new_page()


def box(page, selector: str, index: int = 0) -> dict:
    return page.locator(selector).nth(index).bounding_box()


def pinch(page, cdp, centre_x: float, centre_y: float, start: float, end: float) -> None:
    """Two fingers moving apart from `start` to `end` px (real touch input through the DevTools protocol)."""

    def points(spread):
        return [
            {"x": centre_x - spread / 2, "y": centre_y, "id": 0},
            {"x": centre_x + spread / 2, "y": centre_y, "id": 1},
        ]

    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": points(start)})
    for step in range(1, 9):
        cdp.send(
            "Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": points(start + (end - start) * step / 8)}
        )
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})


def assert_options_reachable(page, viewport_height: int) -> None:
    """Both images and the first option are in view at once: nobody scrolls past the images to answer."""
    first, second = box(page, ".p-images figure", 0), box(page, ".p-images figure", 1)
    option = box(page, ".p-option")
    assert second["y"] + second["height"] <= viewport_height, (second, viewport_height)
    assert option["y"] + option["height"] <= viewport_height, (option, viewport_height)
    assert first["y"] >= 0


def test_on_a_phone_the_pair_is_stacked_enlarges_to_the_full_width_with_pinch_zoom_and_the_options_fit(browser_pages):
    study = make_study(min_viewport_width=360, image_size=(150, 200))  # portrait images: the hardest to fit
    participant = studies.participant_create(study=study)
    context, page = phone(browser_pages)
    page.goto(f"/p/{participant.token}/")
    shot(page, "phone-1-consent")
    assert page.locator("#screen-check").is_hidden() and page.locator("#consent-form").is_visible()
    # No keyboard on a phone: the instructions say tap, and no key shortcut is shown.
    assert "Tap or click an option" in page.inner_text("#how-to-answer")
    assert page.locator(".p-keys").first.is_hidden()
    page.tap("input[name=agree]")
    with page.expect_navigation():
        page.tap("#start")

    page.wait_for_selector("#answer-form")
    shot(page, "phone-2-practice")
    first, second = box(page, ".p-images figure", 0), box(page, ".p-images figure", 1)
    assert second["y"] >= first["y"] + first["height"], "the two images are stacked, not side by side"
    assert first["width"] > 0.85 * 390
    assert_options_reachable(page, 844)
    heights = [b["height"] for b in (box(page, ".p-option", i) for i in range(page.locator(".p-option").count()))]
    assert min(heights) >= 44, heights
    assert page.locator(".p-hint .p-keys").is_hidden()
    assert "width=device-width" in page.get_attribute("meta[name=viewport]", "content")
    assert "user-scalable=no" not in page.get_attribute("meta[name=viewport]", "content")

    # Tap to enlarge: the viewer fills the screen's width; two fingers zoom in; Close goes back.
    page.tap(".p-zoom >> nth=1")
    page.wait_for_selector("#viewer:not([hidden])")
    shot(page, "phone-3-viewer")
    enlarged = box(page, "#viewer-image")
    assert enlarged["width"] >= 0.9 * 390, enlarged
    assert page.inner_text("#viewer .label") == "Second image"
    close = box(page, "#viewer-close")
    assert close["height"] >= 44 and close["y"] >= 0
    cdp = context.new_cdp_session(page)
    pinch(page, cdp, 195, 420, 60, 240)
    assert float(page.get_attribute("#viewer", "data-scale")) > 2.5
    assert box(page, "#viewer-image")["width"] > 2.5 * 390
    page.tap("[data-viewer-other]")  # the other image, at the same zoom
    assert page.inner_text("#viewer .label") == "First image"
    assert float(page.get_attribute("#viewer", "data-scale")) > 2.5
    page.tap("#viewer-close")
    assert page.locator("#viewer").is_hidden()

    # Turned to landscape: the options are still within reach.
    page.set_viewport_size({"width": 844, "height": 390})
    shot(page, "phone-4-landscape")
    assert_options_reachable(page, 390)
    page.set_viewport_size({"width": 390, "height": 844})

    # Practice feedback: the pair again, the right answer marked.
    current = Assignment.objects.get(participant=participant, answered_at__isnull=True)
    wrong = 2 if current.permutation.index(0) != 1 else 1
    with page.expect_navigation():
        page.tap(f".p-option >> nth={wrong - 1}")
    shot(page, "phone-5-feedback")
    assert page.inner_text("h1") == "Not quite"
    assert page.locator(".p-images img").count() == 2
    assert page.evaluate("Array.from(document.querySelectorAll('.p-images img')).every(i => i.naturalWidth > 0)")
    assert "second image" in page.inner_text(".p-marked li.right")
    assert page.locator(".p-marked li.wrong").count() == 1
    with page.expect_navigation():
        page.tap("#next")
    shot(page, "phone-6-practice-done")
    with page.expect_navigation():
        page.tap("#begin")
    shot(page, "phone-7-item")
    while page.locator("#answer-form").count():
        with page.expect_navigation():
            page.tap(".p-option >> nth=0")
    page.wait_for_selector("#completion-code")
    shot(page, "phone-8-done")
    assert box(page, "#copy-code")["height"] >= 44

    participant.refresh_from_db()
    assert (participant.viewport_width, participant.viewport_height) == (390, 844)
    assert participant.device_class == Participant.Device.PHONE and "iPhone" in participant.user_agent
    context.close()


def test_on_a_desktop_the_pair_is_side_by_side_enlarges_and_closes_with_escape_and_keys_are_offered(
    page, live_server, settings
):
    study = make_study()
    participant = studies.participant_create(study=study)
    page.goto(f"/p/{participant.token}/")
    assert page.locator("#screen-check").is_hidden()
    assert page.locator("#how-to-answer .p-keys").is_visible()  # an extra for a wide screen with a mouse
    page.check("input[name=agree]")
    with page.expect_navigation():
        page.click("#start")
    page.wait_for_selector("#answer-form")
    shot(page, "desktop-1-practice")
    first, second = box(page, ".p-images figure", 0), box(page, ".p-images figure", 1)
    assert abs(first["y"] - second["y"]) < 1 and second["x"] > first["x"] + first["width"] - 1
    assert box(page, ".p-images img", 0)["width"] >= 640, "on a laptop the images take the window's width"
    assert_options_reachable(page, 900)
    assert page.locator(".p-hint .p-keys").is_visible()

    page.click(".p-zoom >> nth=0")
    page.wait_for_selector("#viewer:not([hidden])")
    shot(page, "desktop-2-viewer")
    assert box(page, "#viewer-image")["width"] >= 0.9 * 1440
    page.keyboard.press("1")  # a number key in the viewer answers nothing
    page.mouse.move(720, 450)
    page.mouse.wheel(0, -300)
    assert float(page.get_attribute("#viewer", "data-scale")) > 1.1
    page.keyboard.press("Escape")
    assert page.locator("#viewer").is_hidden()
    assert not Assignment.objects.filter(participant=participant, answered_at__isnull=False).exists()

    with page.expect_navigation():
        page.keyboard.press(str(Assignment.objects.get(participant=participant).permutation.index(0) + 1))
    assert page.inner_text("h1") == "Correct"
    shot(page, "desktop-3-feedback")
    assert "second image" in page.inner_text(".p-marked li.right")
    assert page.locator(".p-marked li.wrong").count() == 0
    participant.refresh_from_db()
    assert participant.device_class == Participant.Device.DESKTOP and participant.viewport_width == 1440


def test_a_window_below_the_minimum_is_stopped_before_consent_until_it_is_made_larger(browser_pages):
    study = make_study(min_viewport_width=1024)  # a study for desktops only
    participant = studies.participant_create(study=study)
    context, page = phone(browser_pages, user_agent=TABLET_UA)  # a tablet in split view
    page.goto(f"/p/{participant.token}/")
    shot(page, "small-1-stopped")
    assert page.locator("#screen-check").is_visible()
    assert "390 × 844 px" in page.inner_text("#screen-check")
    assert "at least 1024 px wide" in page.inner_text("#screen-check")
    assert "sideways" not in page.inner_text("#screen-check")  # 844 px turned is still under 1024: not offered
    assert page.locator("#consent-form").is_hidden() and page.locator("#start").is_hidden()

    # The server holds the same line: a consent sent anyway with the small window is refused.
    refused = page.evaluate(
        """async () => {
          const form = document.getElementById("consent-form");
          form.elements.agree.checked = true;
          const response = await fetch(form.action, {method: "POST", body: new FormData(form)});
          return [response.status, await response.text()];
        }"""
    )
    assert refused[0] == 400 and "at least 1024 px wide" in refused[1]
    participant.refresh_from_db()
    assert participant.consented_at is None and participant.viewport_width is None

    # Turned sideways it is still too narrow; full screen passes, and the form appears by itself.
    page.set_viewport_size({"width": 844, "height": 390})
    # The page re-measures on its resize event, which may run after set_viewport_size returns: wait for it.
    expect(page.locator("#screen-check")).to_contain_text("844 × 390 px")
    page.set_viewport_size({"width": 1180, "height": 820})
    page.wait_for_selector("#consent-form", state="visible")
    assert page.locator("#screen-check").is_hidden()
    page.check("input[name=agree]")  # the forged request above ticked it already
    with page.expect_navigation():
        page.tap("#start")
    participant.refresh_from_db()
    assert participant.consented_at is not None
    assert (participant.viewport_width, participant.device_class) == (1180, Participant.Device.TABLET)

    # On the tablet the item fits either way up: side by side in landscape, stacked in portrait.
    page.wait_for_selector("#answer-form")
    assert_options_reachable(page, 820)
    page.set_viewport_size({"width": 820, "height": 1180})
    shot(page, "tablet-portrait")
    first, second = box(page, ".p-images figure", 0), box(page, ".p-images figure", 1)
    assert second["y"] >= first["y"] + first["height"]
    assert_options_reachable(page, 1180)
    context.close()


def test_the_end_page_copies_the_code_and_counts_down_to_the_completion_url(browser_pages, live_server, settings):
    settings.STUDY_REDIRECT_SECONDS = 3
    study = make_study(min_viewport_width=0)
    study.redirect_url = f"{live_server.url}/accounts/login/?returned=yes"
    study.save(update_fields=["redirect_url"])
    participant = studies.participant_create(study=study)
    participant.consent()
    participant.finish()
    context = browser_pages.new_context(
        viewport={"width": 1440, "height": 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    page = context.new_page()
    served = page.goto(f"/p/{participant.token}/done/").text()  # as sent: the script has not ticked yet
    shot(page, "desktop-4-done")
    assert page.get_attribute("#redirect", "href") == study.redirect_url
    assert 'data-seconds="3"' in served and "<strong data-countdown>3</strong>" in served
    page.click("#copy-code")
    expect(page.locator("#copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == study.completion_code
    # It counts down (waited for, not timed: a busy machine may have ticked once already before the first read).
    expect(page.locator("[data-countdown]")).to_have_text(re.compile(r"^[0-2]$"))
    page.wait_for_url("**/accounts/login/?returned=yes", timeout=6000)
    context.close()


def test_on_a_phone_the_end_page_shows_both_codes_each_copied_by_its_own_button(browser_pages):
    study = make_study(min_viewport_width=0)
    participant = studies.participant_create(study=study)
    participant.consent()
    participant.finish()
    context, page = phone(browser_pages, permissions=["clipboard-read", "clipboard-write"])
    page.goto(f"/p/{participant.token}/done/")
    shot(page, "phone-done")
    assert page.inner_text("#completion-code") == study.completion_code
    assert page.inner_text("#participant-code") == participant.completion_code != study.completion_code
    for selector in ("#completion-code", "#participant-code", "#copy-code", "#copy-participant-code"):
        found = box(page, selector)
        assert found["x"] >= 0 and found["x"] + found["width"] <= 390, selector  # nothing runs off the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.click("#copy-participant-code")
    expect(page.locator("#copy-participant-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == participant.completion_code
    page.click("#copy-code")
    expect(page.locator("#copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == study.completion_code
    context.close()


def test_the_dashboard_refreshes_itself_while_a_session_is_under_way_and_stops_after(browser_pages, coordinator):
    study = make_study()
    participant = studies.participant_create(study=study)
    participant.consent()
    context = browser_pages.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15000)
    page = context.new_page()
    # The page's timers run on a clock the test moves on (Playwright's fake timers): each poll comes when the test
    # jumps five seconds ahead, instead of after five seconds of waiting.
    page.clock.install()
    browser_login(page, "cora")
    page.goto(f"/studies/{study.pk}/")
    shot(page, "dashboard")
    assert page.get_attribute("#study-live", "hx-trigger") == "every 5s"
    assert "1 session under way" in page.inner_text("#live-note")
    assert "0 / " in page.inner_text("#progress .kpi >> nth=1")

    # The participant answers an item and leaves: the page shows it without a reload, then stops polling.
    while (practice := participation.participant_next_practice(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=practice.token, position=1)
    scored = participation.participant_next_item(participant=participant)
    participation.assignment_answer(participant=participant, token=scored.token, position=1)
    page.evaluate("window.markerBeforeRefresh = true")
    page.clock.fast_forward(5000)
    expect(page.locator("#progress .kpi:nth-child(2) .value")).to_have_text(re.compile(r"^1 "))
    # htmx sets up the new part's polling when the swap settles, 20 ms after it on the page's clock: that runs
    # first, so the next jump finds the next poll due.
    page.clock.run_for(100)
    Assignment.objects.filter(participant=participant, answered_at__isnull=True).delete()
    participant.finish()
    page.clock.fast_forward(5000)
    expect(page.locator("#study-live")).not_to_have_attribute("hx-trigger", re.compile(".*"))
    assert "No session under way" in page.inner_text("#live-note")
    assert page.evaluate("window.markerBeforeRefresh") is True  # swapped in place, not reloaded
    assert "finished" in page.inner_text("#participants")
    context.close()
