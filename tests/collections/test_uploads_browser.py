"""A zip of images uploaded on the collections page in a real Chromium: the progress shows, the job page follows,
and once the import's unit has run the collection's images exist."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotator.collections.services import collection_import_run
from annotator.jobs.services import UnitRef
from annotator.models import Collection, JobTask
from tests.collection_fixtures import levir_folder
from tests.collections.test_uploads import zipped
from tests.conftest import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


def test_a_zip_uploaded_in_the_browser_becomes_a_collection(page, coordinator, tmp_path):
    data = zipped(levir_folder(tmp_path / "src"))
    browser_login(page, "cora")
    page.goto("/collections/")
    form = page.locator("#collection-upload")
    form.locator("#upload-zip").set_input_files({"name": "levir.zip", "mimeType": "application/zip", "buffer": data})
    form.locator("input[name=name]").fill("levir_up")
    form.locator("select[name=domain]").select_option("aerial")
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "collections-upload-1440.png"))
    form.get_by_role("button", name="Upload and import").click()
    page.wait_for_url("**/jobs/*/")
    unit = JobTask.objects.get(name="annotator.tasks.import_collection")
    collection_import_run(**unit.kwargs, unit=UnitRef(unit.pk, worker="test"))
    page.reload()
    expect(page.locator("main")).to_contain_text("levir_up")
    collection = Collection.objects.get(name="levir_up")
    assert collection.images.count() == 4 and collection.candidates.count() == 2

    # A zip that leaves its folder is refused beside the form, naming the entry.
    page.goto("/collections/")
    bad = zipped(levir_folder(tmp_path / "src"), extra={"../up.png": b"x"})
    form.locator("#upload-zip").set_input_files({"name": "bad.zip", "mimeType": "application/zip", "buffer": bad})
    form.locator("input[name=name]").fill("levir_bad")
    form.locator("select[name=domain]").select_option("aerial")
    form.get_by_role("button", name="Upload and import").click()
    expect(page.locator("#upload-error")).to_contain_text("'../up.png' points outside the collection's folder")
    assert not Collection.objects.filter(name="levir_bad").exists()
