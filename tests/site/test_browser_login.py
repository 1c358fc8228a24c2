from __future__ import annotations

import pytest

from tests.conftest import browser_login_with_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_coordinator_logs_in_and_sees_the_home_page(page, coordinator):
    browser_login_with_form(page, "cora")
    assert page.locator("h1").inner_text() == "Welcome, cora"
    assert page.locator(".topbar .who").inner_text().startswith("cora")


def test_a_wrong_password_shows_an_error(page, coordinator):
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "cora")
    page.fill("input[name=password]", "wrong")
    page.click("button.primary")
    assert "Wrong username or password." in page.locator(".error").inner_text()
