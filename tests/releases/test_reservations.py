"""A release is published whole or not at all: its number is reserved (a row keyed by the export job) before any file
is written, the files wait under a staging name, the release is made and then switched into place. An export that
died between the two is finished by its retry (or the clean-up) with the reserved number; one that died before
gives its number back; a failure says so. Experiments are numbered apart (exp-N) and never a benchmark diff's base.

The crashes here are raised in this process at the exact step; tests/releases/test_publish_faults.py kills a real
worker and cuts its database connection there."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import OperationalError
from django.utils import timezone

from annotator.cleanup.services import storage_clean_up
from annotator.export import services as export_services
from annotator.export.services import ExportOptions, Staged, benchmark_export, export_run, export_start
from annotator.models import Job, JobTask, Release, ReleaseReservation
from annotator.releases.services import (
    ReleaseError,
    release_diff,
    release_get,
    release_reservation_done,
    release_reserve,
)
from annotator.synthetic.services import sweep_publish
from tests.conftest import make_user
from tests.export_fixtures import make_pair, tree_bytes
from tests.synthetic.sweep_fixtures import generated_sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def coordinator():
    return make_user("cora", "coordinator")


def release_options(settings, name: str = "r", **fields) -> ExportOptions:
    return ExportOptions(out=str(settings.EXPORT_ROOT / name), reproducible=True, release=True, **fields)


def staging_folders(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.glob(f".{out.name}.tmp-*")) if out.parent.exists() else []


def manifest_sha256(folder: Path) -> str:
    return hashlib.sha256((folder / "manifest.sha256").read_bytes()).hexdigest()


class Watch:
    """A progress that looks at the database and the disk while the export writes its files."""

    def __init__(self, out: Path, then=None):
        self.out, self.then, self.seen = out, then, []

    def start(self, total=None):
        pass

    def advance(self, steps=1, error=None):
        if not self.seen:
            reservation = ReleaseReservation.objects.get()
            self.seen.append(
                {
                    "number": reservation.number,
                    "release": reservation.release_id,
                    "staging": Path(reservation.staging).name,
                    "staging_there": Path(reservation.staging).is_dir(),
                    "target_there": self.out.exists(),
                    "releases": Release.objects.count(),
                }
            )
            if self.then:
                self.then()


def test_the_number_is_reserved_before_any_file_and_the_files_wait_under_a_staging_name(settings):
    make_pair()
    options = release_options(settings)
    out = Path(options.out)
    watch = Watch(out)
    result = benchmark_export(options=options, progress=watch)
    [seen] = watch.seen
    assert seen["number"] == 1 and seen["release"] is None and seen["releases"] == 0
    assert seen["staging"].startswith(".r.tmp-") and seen["staging_there"] and not seen["target_there"]
    release = Release.objects.get()
    reservation = ReleaseReservation.objects.get()
    assert (reservation.release, reservation.number, release.name) == (release, 1, "v1")
    assert reservation.placed is not None and result["release"]["name"] == "v1"
    assert manifest_sha256(out) == release.manifest_sha256 and staging_folders(out) == []


def crash_after_the_release_is_made(monkeypatch):
    """The worker's connection is lost (or it is killed) right after the release's commit, before the switch."""

    def lost(self):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(Staged, "switch", lost)


@pytest.mark.parametrize("staging", ["kept", "removed"])
def test_a_job_that_died_between_its_release_and_the_switch_is_placed_by_its_retry(
    staging, coordinator, settings, monkeypatch
):
    make_pair()
    make_pair(category="attribute", question="Which colour did the cup turn?", answer="red", distractors=["blue"])
    options = release_options(settings)
    out = Path(options.out)
    job = export_start(options=options, user=coordinator)
    with monkeypatch.context() as patched:
        crash_after_the_release_is_made(patched)
        with pytest.raises(OperationalError):
            export_run(job_id=job.pk)
    release = Release.objects.get()
    reservation = ReleaseReservation.objects.get()
    assert (reservation.release, reservation.placed, out.exists()) == (release, None, False)  # made, not in place
    if staging == "removed":  # the clean-up took the dead claim's staging: the files are written from the database
        Path(reservation.staging).rename(out.parent / "elsewhere")

    JobTask.objects.filter(job=job).update(heartbeat=timezone.now() - timedelta(hours=1))  # its worker is gone
    job = export_run(job_id=job.pk)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert job.result["release"] == {"number": 1, "name": "v1", "title": ""}
    assert Release.objects.get() == release  # exactly one, with the reserved number
    assert manifest_sha256(out) == release.manifest_sha256 and staging_folders(out) == []
    assert ReleaseReservation.objects.get().placed is not None
    if staging == "removed":
        assert tree_bytes(out) == tree_bytes(out.parent / "elsewhere")  # byte for byte what the export wrote


def test_the_clean_up_places_a_made_release_whose_export_is_gone(coordinator, settings, monkeypatch):
    make_pair()
    options = release_options(settings)
    job = export_start(options=options, user=coordinator)
    with monkeypatch.context() as patched:
        crash_after_the_release_is_made(patched)
        with pytest.raises(OperationalError):
            export_run(job_id=job.pk)
    assert storage_clean_up(grace_minutes=0)["releases"]["placed"] == []  # its job is active: the retry's to do
    Job.objects.get(pk=job.pk).finish(error="given up: its worker stopped beating")
    assert storage_clean_up(grace_minutes=0)["releases"] == {"placed": ["v1"], "given_back": [], "problems": []}
    assert manifest_sha256(Path(options.out)) == Release.objects.get().manifest_sha256


def test_a_retry_of_an_export_killed_before_its_release_was_made_takes_the_reserved_number(
    coordinator, settings, monkeypatch
):
    make_pair()
    options = release_options(settings)
    out = Path(options.out)
    job = export_start(options=options, user=coordinator)

    def killed(*args, **kwargs):
        raise OperationalError("terminating connection due to administrator command")

    with monkeypatch.context() as patched:
        patched.setattr(export_services, "place_staged", killed)  # the files are staged, the release not made
        with pytest.raises(OperationalError):
            export_run(job_id=job.pk)
    [left] = staging_folders(out)
    reservation = ReleaseReservation.objects.get()
    assert (reservation.number, reservation.release, Path(reservation.staging).name) == (1, None, left)
    assert not out.exists() and not Release.objects.exists()  # nothing anyone can see names v1

    JobTask.objects.filter(job=job).update(heartbeat=timezone.now() - timedelta(hours=1))
    job = export_run(job_id=job.pk)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    release = Release.objects.get()
    assert (release.name, release.export_job_id, ReleaseReservation.objects.get().release) == ("v1", job.pk, release)
    assert left not in staging_folders(out) and staging_folders(out) == []  # the killed attempt's staging removed
    benchmark_export(options=release_options(settings, "next"))
    assert list(Release.objects.values_list("number", flat=True)) == [2, 1]  # the next release is v2, not v1 again


def test_a_failed_export_gives_its_number_back_and_says_so(settings):
    make_pair()
    options = release_options(settings)
    out = Path(options.out)

    def another_export_lands_there():
        out.mkdir(parents=True)
        (out / "manifest.sha256").write_text("")

    with pytest.raises(export_services.ExportTargetTaken) as refused:
        benchmark_export(options=options, progress=Watch(out, then=another_export_lands_there))
    assert "already holds an export" in str(refused.value)
    assert "No release was made: v1 is free again." in str(refused.value)
    assert not Release.objects.exists() and not ReleaseReservation.objects.exists()
    assert staging_folders(out) == []
    benchmark_export(options=release_options(settings, "other"))
    assert Release.objects.get().name == "v1"


def test_a_number_held_by_a_live_export_refuses_another_which_takes_it_once_that_export_is_gone(coordinator, settings):
    make_pair()
    first = export_start(options=release_options(settings, "first"), user=coordinator)
    held, _ = release_reserve(experiment=False, target=str(settings.EXPORT_ROOT / "first"), job_id=first.pk)
    staging = settings.EXPORT_ROOT / ".first.tmp-0123abcd"
    staging.mkdir(parents=True)
    ReleaseReservation.objects.filter(pk=held.pk).update(staging=str(staging))
    second = export_start(options=release_options(settings, "second"), user=coordinator)
    refused = export_run(job_id=second.pk)
    assert refused.status == Job.Status.FAILED
    assert (
        f"Another export (export #{first.pk}, to {settings.EXPORT_ROOT / 'first'}) is publishing release v1 now"
        in (refused.errors[-1])
    )
    assert release_reserve(experiment=False, target="x", job_id=first.pk)[0] == held  # never blocks on itself

    Job.objects.get(pk=first.pk).finish(error="given up: its worker stopped beating")
    benchmark_export(options=release_options(settings, "third"))
    assert Release.objects.get().name == "v1" and not staging.exists()  # given back, its staging removed


def test_a_command_line_export_that_died_holds_no_number(settings):
    make_pair()
    reservation, _ = release_reserve(experiment=False, target="/elsewhere", job_id=None)
    with pytest.raises(ReleaseError, match="export_benchmark, command line"):
        release_reserve(experiment=False, target="/other", job_id=9)  # its process holds it: alive
    release_reservation_done(reservation)  # what its connection's end does when the process dies
    benchmark_export(options=release_options(settings))
    assert Release.objects.get().name == "v1" and ReleaseReservation.objects.get().target.endswith("/r")


def test_an_export_with_nothing_to_publish_makes_no_release(settings):
    make_pair(question="")  # considered, and left out with its reason
    with pytest.raises(ReleaseError, match=r"Nothing to publish: none of the 1 pair\(s\) considered can be exported"):
        benchmark_export(options=release_options(settings))
    assert not Release.objects.exists() and not ReleaseReservation.objects.exists()


def test_an_experiment_is_numbered_apart_and_never_the_base_of_a_benchmark_diff(coordinator, settings, client_for):
    pairs = [make_pair(), make_pair()]
    benchmark_export(options=release_options(settings, "one"))
    sweep = generated_sweep(coordinator, landing="accepted")
    job = export_run(job_id=sweep_publish(sweep=sweep, user=coordinator).pk)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    experiment = Release.objects.get(options__sweep=sweep.pk)
    assert (experiment.name, experiment.number, experiment.experiment) == ("exp-1", 1, True)
    assert f"- version: exp-1: experiment: sweep {sweep.pk}" in experiment.card
    assert job.result["release"]["name"] == "exp-1"

    benchmark_export(options=release_options(settings, "two"))
    second = release_get("v2")
    assert release_get("exp-1") == experiment and release_get("2") == second
    diff = release_diff(release=second)
    assert diff["previous"].name == "v1" and diff["removed"] == [] and diff["unchanged"] == len(pairs)
    assert release_diff(release=experiment) is None  # the first of its sweep
    page = client_for(coordinator).get("/releases/exp-1/")
    assert page.status_code == 200 and "exp-1" in page.content.decode()
    assert client_for(coordinator).get("/releases/v3/").status_code == 404
    listing = client_for(coordinator).get("/releases/").content.decode()
    assert 'href="/releases/exp-1/"' in listing and 'href="/releases/v2/"' in listing
