"""In Chromium: the top bar's menus by keyboard and by touch, within 1280 px, and a coordinator's walk to a
collection's page, archiving it, taking it back, and being told why it cannot be deleted."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotator.models import Collection, Pair
from tests.conftest import browser_login
from tests.factories import make_candidate, make_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_coordinator_finds_a_collection_by_the_menus_and_archives_it(browser_pages, coordinator):
    candidate = make_candidate(source="levir_cd")
    pair = make_pair(source="levir_cd")
    Pair.objects.filter(pk=pair.pk).update(image_1=candidate.image_1, image_2=candidate.image_2)
    page = browser_pages.new_page(viewport={"width": 1280, "height": 800})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(page, "cora")
    page.goto("/")
    # Four menus on one line at 1280 px: the bar is as high as one row of it.
    bar = page.locator(".topbar").bounding_box()
    assert bar["height"] < 60
    assert page.locator("#nav > ul > li").count() == 4
    # Keyboard: Enter opens a menu, the arrows walk its links and the next menu, Escape closes it.
    page.locator("#nav-sources summary").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#nav-sources .menu-links")).to_be_visible()
    page.keyboard.press("ArrowDown")
    expect(page.locator("#nav-sources .menu-links a").first).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.locator("#nav-sources").get_by_role("link", name="Collections")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#nav-sources .menu-links")).to_be_hidden()
    expect(page.locator("#nav-sources summary")).to_be_focused()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#nav-measure summary")).to_be_focused()
    # One menu open at a time; a click elsewhere closes it.
    page.locator("#nav-make summary").click()
    page.locator("#nav-operate summary").click()
    expect(page.locator("#nav-make .menu-links")).to_be_hidden()
    expect(page.locator("#nav-operate .menu-links")).to_be_visible()
    page.mouse.click(1200, 700)  # outside the menu
    expect(page.locator("#nav-operate .menu-links")).to_be_hidden()
    # To the collection, marked as the current page.
    page.locator("#nav-sources summary").click()
    page.locator("#nav-sources").get_by_role("link", name="Collections").click()
    expect(page.locator('#nav-sources a[aria-current="page"]')).to_have_attribute("href", "/collections/")
    page.get_by_role("link", name="levir_cd").click()
    expect(page.locator("h1")).to_contain_text("levir_cd")
    page.locator(".manage-actions").get_by_role("link", name="Archive").click()
    page.get_by_role("button", name="Archive").click()
    expect(page.locator("#archived-note")).to_be_visible()
    assert Collection.objects.get().archived_at is not None
    page.get_by_role("button", name="Take out of the archive").click()
    expect(page.locator("#archived-note")).to_have_count(0)
    assert Collection.objects.get().archived_at is None
    page.locator(".manage-actions").get_by_role("link", name="Delete").click()
    expect(page.locator("#cannot-delete")).to_be_visible()
    expect(page.locator("ul.dependents")).to_contain_text("1 pair")
    assert errors == []


def test_the_menus_open_and_close_by_touch_on_a_tablet(browser_pages, annotator):
    page = browser_pages.new_page(viewport={"width": 820, "height": 1180}, has_touch=True, is_mobile=True)
    browser_login(page, "alice")
    page.goto("/")
    page.locator("#nav-make summary").tap()
    expect(page.locator("#nav-make").get_by_role("link", name="Pick pairs")).to_be_visible()
    expect(page.locator("#nav-sources")).to_have_count(0)  # an annotator's menus only
    page.touchscreen.tap(800, 1160)  # outside the menu
    expect(page.locator("#nav-make .menu-links")).to_be_hidden()
