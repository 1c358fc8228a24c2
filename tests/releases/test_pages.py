"""/releases/ and /releases/vN/: for coordinators only; the list shows releases and the exports made before them,
a release's page its counts with totals, its hashes, its diff and its card."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from annotator.export.services import ExportOptions, export_run, export_start
from annotator.models import Job, Pair, Release
from tests.export_fixtures import make_pair

pytestmark = pytest.mark.django_db

PAGES = ["/releases/", "/releases/v1/"]


def publish(out, *extra) -> Release:
    call_command("export_benchmark", "--out", str(out), "--reproducible", "--val-fraction", "0", "--release", *extra)
    return Release.objects.order_by("-number").first()


@pytest.mark.parametrize("url", PAGES)
def test_pages_send_anonymous_users_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("url", PAGES)
def test_pages_refuse_other_roles(client_for, annotator, reviewer, url):
    assert client_for(annotator).get(url).status_code == 403
    assert client_for(reviewer).get(url).status_code == 403


@pytest.mark.parametrize("url", PAGES)
def test_pages_refuse_wrong_methods(client_for, coordinator, url):
    assert client_for(coordinator).post(url).status_code == 405


def test_the_list_shows_releases_and_the_exports_made_before_releases(client_for, coordinator, tmp_path, settings):
    make_pair()
    old = export_run(
        job_id=export_start(options=ExportOptions(out=str(settings.EXPORT_ROOT / "old")), user=coordinator).pk
    )
    options = ExportOptions(out=str(settings.EXPORT_ROOT / "new"), release=True, release_title="Spring cut")
    job = export_run(job_id=export_start(options=options, user=coordinator).pk)
    release = Release.objects.get()
    page = client_for(coordinator)
    page.get("/releases/")  # roles and session cached
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        html = page.get("/releases/").content.decode()
    assert len(queries) <= 8, [q["sql"] for q in queries]
    assert 'href="/releases/v1/"><strong>v1</strong>' in html and "Spring cut" in html and "cora" in html
    assert release.manifest_sha256[:12] in html and f'href="/jobs/{job.pk}/">#{job.pk}</a>' in html
    before = html.split('id="before-releases"')[1]
    assert f'href="/jobs/{old.pk}/">#{old.pk}</a> <span class="badge badge-draft">before releases' in before
    assert f"#{job.pk}<" not in before
    exports = page.get("/exports/").content.decode()
    assert 'href="/releases/v1/">v1</a>' in exports and 'href="/releases/"' in exports


def attribute_pair(**fields) -> Pair:
    # Not a binary category: no answer balancing, so no item's orientation depends on which others are released.
    return make_pair(
        category="attribute", question="Which colour did the cup turn?", answer="red", distractors=["blue"], **fields
    )


def test_the_release_page_shows_counts_with_totals_hashes_the_diff_and_the_card(client_for, coordinator, tmp_path):
    attribute_pair()
    gone = attribute_pair(domain="gaming")
    make_pair()
    publish(tmp_path / "a")
    Pair.objects.filter(pk=gone.pk).update(status=Pair.Status.REJECTED)
    v2 = publish(tmp_path / "b", "--release-title", "Fewer")
    html = client_for(coordinator).get("/releases/v2/").content.decode()
    assert "<h1>v2 · Fewer</h1>" in html and v2.manifest_sha256 in html and v2.content_sha256 in html
    counts = html.split('id="release-counts"')[1].split("</section>")[0]
    assert "<th>all</th>" in counts and ">natural</th>" in counts and "gaming" not in counts
    assert '<td>attribute</td><td class="num group">1</td><td class="num">0</td>' in counts
    assert '<th class="num group">2</th><th class="num">0</th><th class="num">2</th></tr>' in counts  # the totals
    diff = html.split('id="release-diff"')[1]
    assert 'Since <a href="/releases/v1/">v1</a>' in diff and "0 added · 1 removed · " in diff
    assert f"attribute_yt8m_{gone.source_id}" in diff and "the pair is now rejected" in diff
    assert 'id="release-card"' in html and "- version: v2: Fewer" in html
    first = client_for(coordinator).get("/releases/v1/").content.decode()
    assert "The first release: nothing to compare with." in first and "gaming" in first
    assert client_for(coordinator).get("/releases/v9/").status_code == 404


def test_the_release_page_shows_the_studies_and_the_model_runs_on_it(client_for, coordinator, tmp_path):
    make_pair()
    publish(tmp_path / "a")
    html = client_for(coordinator).get("/releases/v1/").content.decode()
    studies = html.split('<section id="release-studies">')[1].split("</section>")[0]
    assert "Studies on this release" in studies and "No study is drawn from this release yet." in studies
    runs = html.split('<section id="release-model-runs">')[1].split("</section>")[0]
    assert "Model runs on this release" in runs
    assert 'href="/releases/v1/report/test/"' in html and 'href="/releases/v1/report/val/"' in html


def test_the_export_form_publishes_a_release(client_for, coordinator, settings, django_capture_on_commit_callbacks):
    make_pair()
    page = client_for(coordinator)
    form = {"target": "r", "val_fraction": "0", "seed": "0", "release": "on", "release_title": "From the page"}
    preview = page.get("/exports/", {**form, "action": "preview"}).content.decode()
    assert "Published as release <strong>v1</strong> once written." in preview
    with django_capture_on_commit_callbacks(execute=False):
        assert page.post("/exports/", {**form, "action": "start"}).status_code == 302
    job = export_run(job_id=Job.objects.get(kind=Job.Kind.EXPORT).pk)
    release = Release.objects.get()
    assert (release.export_job, release.title, release.created_by) == (job, "From the page", coordinator)
    refused = page.post("/exports/", {**form, "target": "s", "release": "", "action": "start"}, follow=True)
    assert "a release title or notes only go with publishing a release." in refused.content.decode()
    assert Release.objects.count() == 1
