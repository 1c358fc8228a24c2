"""A release is public from the first time its files leave the server (the command line, `release_files`, a zip
download, an S3 target, or marked by hand), whatever its pairs' source; a study on public items is refused unless
chosen open book, and items that become public while a study runs count from that moment, answers before and after
apart, in the dashboard, the report and every download."""

from __future__ import annotations

import importlib
import json
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.management import call_command
from django.utils import timezone

from annotator.export.services import (
    ExportOptions,
    benchmark_export,
    export_run,
    export_start,
    export_zip_run,
    export_zip_start,
)
from annotator.models import Category, Domain, Job, Pair, Release, ReleasePublication
from annotator.releases.services import release_publication_record
from evaluation.results.release_report import release_report_of
from evaluation.results.report import release_report_files
from evaluation.results.study_summary import study_summary
from evaluation.studies import participation, reports
from evaluation.studies import services as studies
from subtlebench.errors import Invalid
from tests.export_fixtures import make_pair
from tests.factories import make_image
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db

# A fixed moment for answers and publications: no test depends on the wall clock's pace.
T0 = timezone.now() - timedelta(days=10)


def sourced_pair(source: str, number: int, domain: str = Domain.INDUSTRIAL) -> Pair:
    """A pair with no video: from a collection (an MVTec-shaped folder) or made by the synthetic generator."""
    return Pair.objects.create(
        image_1=make_image(number, source=source),
        image_2=make_image(number + 1, source=source),
        category=Category.EXISTENCE,
        domain=domain,
        status=Pair.Status.ACCEPTED,
        question="What was added in the second image?",
        answer="a scratch",
        distractors=["a dent", "a hole"],
        source=source,
        source_id=f"{source}_{number}",
        similarity=0.95,
        similarity_model=make_pair().similarity_model,
    )


def draw(release: Release, **options):
    return studies.study_create(name="S", release=release, fraction=1, practice_count=0, **options)


def assert_refused_then_open_book(release: Release, scored: int) -> None:
    with pytest.raises(studies.StudyError) as refused:
        draw(release)
    [message] = refused.value.message_dict["open_book"]
    assert f"{scored} of the {scored} items drawn are already public" in message
    study = draw(release, open_book=True)
    public = reports.public_items(study)
    assert (study.open_book, public["scored"], public["of"], public["label"]) == (True, scored, scored, "open book")


def test_a_release_exported_by_the_command_line_is_public_and_a_study_on_it_refused_or_open_book(tmp_path):
    for _ in range(3):
        make_pair()
    call_command("export_benchmark", "--out", str(tmp_path / "v1"), "--release", "--val-fraction", "0")
    release = Release.objects.get()
    [publication] = release.publications.all()
    assert publication.how == ReleasePublication.How.CLI_EXPORT and publication.where == str(tmp_path / "v1")
    assert Pair.objects.already_public().count() == 3
    assert_refused_then_open_book(release, 3)


def test_a_release_frozen_unpublished_is_public_from_release_files_on(tmp_path):
    for _ in range(3):
        make_pair()
    call_command("export_benchmark", "--out", str(tmp_path / "v1"), "--release", "--unpublished", "--val-fraction", "0")
    release = Release.objects.get()
    assert not release.publications.exists() and Pair.objects.already_public().count() == 0
    study = draw(release)  # the guides' order: freeze, study, publish
    assert reports.public_items(study)["label"] == ""
    call_command("release_files", "v1", str(tmp_path / "copy"), "--note", "to the lab's web site")
    [publication] = release.publications.all()
    assert (publication.how, publication.where) == (ReleasePublication.How.RELEASE_FILES, str(tmp_path / "copy"))
    assert reports.public_items(study)["scored"] == 3  # the running study counts them from now on
    assert_refused_then_open_book(release, 3)


def test_a_release_exported_by_a_job_is_public_once_its_zip_is_downloaded(client_for, coordinator, settings, tmp_path):
    settings.EXPORT_ROOT = tmp_path / "exports"
    for _ in range(2):
        make_pair()
    options = ExportOptions(out=str(settings.EXPORT_ROOT / "v1"), reproducible=True, release=True, val_fraction=0)
    job = export_run(job_id=export_start(options=options, user=coordinator).pk)
    release = job.releases.get()
    assert not release.publications.exists()  # on the server only: frozen, not public
    draw(release)
    export_zip_run(job_id=export_zip_start(job=job, user=coordinator).pk)
    response = client_for(coordinator).get(f"/exports/{job.pk}/download/?file=1")
    assert response.status_code == 200
    b"".join(response.streaming_content)
    [publication] = release.publications.all()
    assert (publication.how, publication.who) == (ReleasePublication.How.ZIP_DOWNLOAD, coordinator)
    assert_refused_then_open_book(release, 2)


def test_a_release_exported_to_s3_is_public_from_the_upload(s3_bucket, coordinator):
    for _ in range(2):
        make_pair()
    result = benchmark_export(
        options=ExportOptions(out=f"s3://{s3_bucket}/bench", release=True, val_fraction=0), published_by=coordinator
    )
    release = Release.objects.get()
    [publication] = release.publications.all()
    assert (publication.how, publication.who) == (ReleasePublication.How.S3_TARGET, coordinator)
    assert publication.where == result["root"] and publication.where.startswith(f"s3://{s3_bucket}/bench/")
    assert_refused_then_open_book(release, 2)


def test_a_never_published_release_of_collection_and_synthetic_pairs_has_no_public_item(client_for, coordinator):
    pairs = [sourced_pair("mvtec_ad", n * 2) for n in range(3)]
    pairs += [sourced_pair("synthetic", 20 + n * 2, Domain.SYNTHETIC) for n in range(3)]
    release = make_release(pairs)
    study = draw(release)
    participation.participant_answer_all(participant=studies.participant_create(study=study), now=T0)
    public = reports.public_items(study)
    assert (public["scored"], public["of"], public["label"], public["warning"]) == (0, 6, "", "")
    assert Pair.objects.already_public().count() == 0
    page = client_for(coordinator).get(f"/studies/{study.pk}/").content.decode()
    assert 'id="public-items"' not in page and 'id="baseline-public"' not in page
    report = release_report_of(release)
    assert report.humans.label == "Humans"


def test_items_public_while_a_study_runs_count_from_then_with_answers_before_and_after_apart(client_for, coordinator):
    pairs = [make_pair() for _ in range(4)]
    release = make_release(pairs)
    study = draw(release, raters_per_item=2)
    answered_before = participation.participant_answer_all(
        participant=studies.participant_create(study=study), accuracy=1.0, now=timezone.now() - timedelta(minutes=10)
    )
    published = timezone.now()
    release_publication_record(
        release=release, how=ReleasePublication.How.BY_HAND, who=coordinator, when=published, note="on a poster"
    )
    later = published + timedelta(hours=1)
    # A second participant answers after it: the answers are timed after the publication, not by the clock's pace.
    answered_after = participation.participant_answer_all(
        participant=studies.participant_create(study=study), accuracy=0.0, seed=3, now=later
    )
    assert (answered_before, answered_after) == (4, 4)
    public = reports.public_items(study)
    assert (public["scored"], public["of"], public["open_book"]) == (4, 4, False)
    assert public["answers_before"]["n"] == 4 and public["answers_before"]["accuracy"] == 1.0
    assert public["answers_after"]["n"] == 4 and public["answers_after"]["accuracy"] == 0.0
    day = published.strftime("%Y-%m-%d")
    assert public["label"] == f"4 items public since {day}, 4 answers after"

    client = client_for(coordinator)
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert 'id="baseline-public"' in page and f"4 items public since {day}, 4 answers after" in page
    assert "answers before 4 (100.0%) · after 4 (0.0%)" in page
    summary = json.loads(client.get(f"/studies/{study.pk}/summary.json").content)
    assert summary["public_items"]["label"] == public["label"]
    assert summary["study"]["baseline"].endswith(f"({public['label']})")
    api = client.get(f"/api/studies/{study.pk}/results/").json()
    assert api["public_items"]["answers_after"]["n"] == 4
    csv_rows = client.get(f"/studies/{study.pk}/responses.csv").content.decode().splitlines()
    assert csv_rows[0].endswith("item_public_since,answered_after_public")
    assert sorted(row.rsplit(",", 1)[1] for row in csv_rows[1:]) == ["0"] * 4 + ["1"] * 4

    # The release report and every one of its files name the baseline.
    label = f"Humans ({public['label']})"
    files = {name: content for name, content, _ in release_report_files(release_report_of(release))}
    for name in ("v1-test-report.csv", "v1-test-report.json", "v1-test-report.md", "v1-test-report.tex"):
        assert label.encode() in files[name], name
    html = client.get(f"/releases/v{release.number}/report/").content.decode()
    assert 'id="report-public"' in html and "4 answers were given after they became public" in html


def test_an_open_book_study_is_labelled_so_in_the_report_files(coordinator):
    release = make_release([make_pair() for _ in range(2)])
    release_publication_record(release=release, how=ReleasePublication.How.BY_HAND, who=coordinator)
    study = draw(release, open_book=True)
    participation.participant_answer_all(participant=studies.participant_create(study=study))
    files = {name: content for name, content, _ in release_report_files(release_report_of(release))}
    assert all(b"Humans (open book)" in files[f"v1-test-report.{ext}"] for ext in ("csv", "json", "md", "tex"))
    assert study_summary(study)["paper_table"]["rows"][0]["label"] == "Humans (this study, open book)"


def test_the_form_and_the_api_refuse_a_study_on_public_items_unless_open_book(client_for, coordinator):
    release = make_release([make_pair() for _ in range(2)])
    release_publication_record(release=release, how=ReleasePublication.How.BY_HAND, who=coordinator)
    client = client_for(coordinator)
    fields = {"name": "S", "release": release.number, "split": "test", "fraction": 1, "seed": 0}
    fields |= {"raters_per_item": 1, "practice_count": 0, "items_per_participant": 0, "invites": 0, "open_cap": 0}
    refused = client.post("/studies/create/", fields, follow=True).content.decode()
    assert "2 of the 2 items drawn are already public" in refused and not release.studies.exists()
    client.post("/studies/create/", {**fields, "open_book": "on"})
    assert list(release.studies.values_list("open_book", flat=True)) == [True]

    api = client.post(
        "/api/studies/create/", {"name": "A", "release": release.number, "fraction": 1}, content_type="application/json"
    )
    assert api.status_code == 400 and "open_book" in json.dumps(api.json())
    made = client.post(
        "/api/studies/create/",
        {"name": "A", "release": release.number, "fraction": 1, "open_book": True},
        content_type="application/json",
    )
    assert made.status_code == 201 and made.json()["open_book"] is True


def test_a_coordinator_marks_a_release_public_by_hand_on_its_page_and_by_the_api(client_for, coordinator):
    release = make_release([make_pair() for _ in range(2)])
    client = client_for(coordinator)
    page = client.get(f"/releases/v{release.number}/").content.decode()
    assert "Frozen, not published" in page and 'id="release-mark-public"' in page
    when = timezone.localtime(timezone.now()).strftime("%Y-%m-%dT%H:%M")  # the form's precision: the minute
    response = client.post(
        f"/releases/v{release.number}/published/", {"when": when, "where": "https://example.org/bench", "note": ""}
    )
    assert response.status_code == 302
    [publication] = release.publications.all()
    assert (publication.how, publication.who, publication.where) == (
        "by_hand",
        coordinator,
        "https://example.org/bench",
    )
    page = client.get(f"/releases/v{release.number}/").content.decode()
    assert "Public since" in page and "https://example.org/bench" in page

    future = (timezone.now() + timedelta(days=2)).isoformat()
    refused = client.post(
        f"/api/releases/v{release.number}/publications/mark/", {"when": future}, content_type="application/json"
    )
    assert refused.status_code == 400 and "future" in json.dumps(refused.json())
    made = client.post(
        f"/api/releases/v{release.number}/publications/mark/",
        {"when": timezone.now().isoformat(), "where": "a conference USB stick"},
        content_type="application/json",
    )
    assert made.status_code == 201 and made.json()["how"] == "by_hand"
    listed = client.get(f"/api/releases/v{release.number}/publications/").json()
    assert [row["where"] for row in listed] == ["https://example.org/bench", "a conference USB stick"]


def test_the_mark_public_page_refuses_anonymous_users_other_roles_and_gets(client, client_for, annotator, coordinator):
    release = make_release([make_pair()])
    url = f"/releases/v{release.number}/published/"
    assert "/accounts/login/" in client.post(url, {"when": "2020-01-01T00:00"})["Location"]
    assert client_for(annotator).post(url, {"when": "2020-01-01T00:00"}).status_code == 403
    assert client_for(coordinator).get(url)["Location"] == f"/releases/v{release.number}/"
    assert client_for(coordinator).put(url).status_code == 405
    assert not release.publications.exists()


def test_a_publication_before_the_release_was_made_or_in_the_future_is_refused(coordinator):
    release = make_release([make_pair()])
    for when in (release.created - timedelta(minutes=2), timezone.now() + timedelta(days=1)):
        with pytest.raises(Invalid):
            release_publication_record(release=release, how=ReleasePublication.How.BY_HAND, when=when)
    assert not release.publications.exists()


def test_the_data_migration_keeps_the_public_since_of_export_jobs(coordinator):
    stamped = Job.objects.create(kind=Job.Kind.EXPORT, status=Job.Status.SUCCEEDED)
    quiet = Job.objects.create(kind=Job.Kind.EXPORT, status=Job.Status.SUCCEEDED)
    public = make_release([make_pair()], export_job=stamped)
    private = make_release([make_pair()], export_job=quiet)
    stamp = timezone.now()
    stamped.mark_files_public(now=stamp)
    migration = importlib.import_module("annotator.migrations.0034_release_publications")
    migration.publications_from_export_jobs(apps, None)
    [publication] = ReleasePublication.objects.all()
    assert (publication.release, publication.when) == (public, max(stamp, public.created))
    assert not private.publications.exists()
