"""The release report as coordinators get it: the page, the six downloads and `manage.py release_report`, on the
demo's release v1 (its study and its model run); the same bytes after `dumpdata` and `loaddata` into a fresh
database."""

from __future__ import annotations

import codecs
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from annotator.export.format import validate_dataset
from annotator.export.services import ExportOptions
from annotator.models import Release
from benchmark.card import left_out_warnings, split_totals
from devtools.localservices import BASE_DIR
from evaluation.models import ModelEvaluation, Study
from evaluation.results.release_report import release_report_of
from evaluation.results.report import release_report_files
from evaluation.runs.naming import run_name
from tests.conftest import built_once, database_url
from tests.database_template import create_empty_database, drop_database
from tests.demo_fixtures import cached_demo_videos
from tests.disk_cache import cache_root
from tests.export_fixtures import read_jsonl
from tests.worker_zygote import python_run

pytestmark = [pytest.mark.django_db, pytest.mark.torch]

# What a restore needs: the people and every row of the project's apps (content types and permissions are made by
# migrate in the fresh database; sessions and login attempts are not the data).
DUMPED = ["auth.group", "auth.user", "subtlebench", "annotator", "evaluation"]


@pytest.fixture(scope="module")
def demo(request, django_db_setup, django_db_blocker, tmp_path_factory, tiny_dinov3_dir):
    """The demo's data with its release v1, its study and its model run: seeded once for the module's tests (its
    videos from the pytest cache)."""
    folder = tmp_path_factory.mktemp("demo")
    cached_demo_videos(cache_root(request, tmp_path_factory, "demo"), folder / "demo")
    with built_once(django_db_blocker, folder, tiny_dinov3_dir):
        call_command("seed_demo", stdout=io.StringIO())
        yield Release.objects.get(number=1)


def report_bytes(release: Release, split: str = "test") -> dict[str, bytes]:
    return {name: content for name, content, _ in release_report_files(release_report_of(release, split=split))}


def manage(*args: str, database: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database}
    return python_run(["manage.py", *args], cwd=BASE_DIR, env=env, timeout=300)


def test_the_demo_release_is_the_default_export_with_items_in_both_splits(demo):
    """The demo's v1 is what the export page and `export_benchmark` make by default (val fraction 0.1, seed 0)."""
    defaults = ExportOptions(out=demo.options["out"], reproducible=True, release=True, release_title=demo.title)
    assert demo.options == defaults.as_dict()
    totals = split_totals(demo.counts)
    assert demo.item_count == 13 and totals["val"] >= 1 and demo.left_out == [] and left_out_warnings(totals) == []
    out = Path(demo.options["out"])
    for split in ("test", "val"):
        assert read_jsonl(out / f"data/{split}.jsonl"), f"{split}.jsonl is empty"
    assert list(validate_dataset(out)) == []


@pytest.mark.slow
def test_the_demo_release_has_a_study_and_a_model_run_and_its_report_the_same_bytes_after_a_restore(demo, tmp_path):
    study = Study.objects.get(release=demo)
    run = ModelEvaluation.objects.get(release=demo)
    assert study.baseline_label.startswith("Humans on release v1")
    files = report_bytes(demo)
    assert sorted(files) == [f"v1-test-{name}" for name in ("gaps.png", "gaps.svg", "report.csv", "report.json",
                                                             "report.md", "report.tex")]  # fmt: skip
    document = json.loads(files["v1-test-report.json"])
    assert document["release"] == "v1" and document["release_hash"] == demo.content_sha256
    assert document["humans"]["micro"]["answers"] == study.items.scored().count() * study.raters_per_item
    assert [row["label"] for row in document["models"]] == [run_name(run)]
    assert document["models"][0]["micro"]["items"] == demo.items.filter(split="test").count()

    dump = tmp_path / "dump.json"
    call_command("dumpdata", *DUMPED, output=str(dump), verbosity=0)
    restored = f"{connection.settings_dict['NAME']}_restored"
    create_empty_database(restored)
    try:
        url = database_url(restored)
        loaded = manage("loaddata", str(dump), database=url)
        assert loaded.returncode == 0, loaded.stderr
        written = manage("release_report", "v1", str(tmp_path / "restored"), database=url)
        assert written.returncode == 0, written.stderr
    finally:
        drop_database(restored)
    for name, content in files.items():
        assert (tmp_path / "restored" / name).read_bytes() == content, name


@pytest.mark.slow
def test_the_report_page_and_its_downloads_for_a_coordinator_only(demo, client_for, coordinator, annotator):
    files = report_bytes(demo, "val")
    client = client_for(annotator)
    assert client.get("/releases/v1/report/").status_code == 403
    client = client_for(coordinator)
    page = client.get("/releases/v1/report/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Release v1 report" in body and "demo-guesser" in body and "Humans" in body
    assert 'id="report-figure"' in body and "<svg" in body
    for name, content in files.items():
        response = client.get(f"/releases/v1/report/val/{name}")
        # A CSV download is the file with a byte order mark, so that a spreadsheet reads it as UTF-8.
        expected = codecs.BOM_UTF8 + content if name.endswith(".csv") else content
        assert response.status_code == 200 and response.content == expected, name
        assert response["Content-Disposition"] == f'attachment; filename="{name}"'
    assert client.get("/releases/v1/report/val/v1-val-other.csv").status_code == 404
    assert client.get("/releases/v1/report/train/").status_code == 404
    assert client.get("/releases/v9/report/").status_code == 404
    detail = client.get("/releases/v1/").content.decode()
    assert "Studies on this release" in detail and "Model runs on this release" in detail
    assert "/releases/v1/report/test/" in detail


def test_the_report_command_says_which_releases_there_are(tmp_path):
    result = manage("release_report", "v7", str(tmp_path), database=database_url())
    assert result.returncode != 0 and "There is no release 'v7'" in result.stderr
