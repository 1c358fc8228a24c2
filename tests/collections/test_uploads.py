"""Image collections uploaded from the browser (a zip or a folder): stored where the workers read them, imported by
the same job as a server path; a zip that escapes its folder, holds a link or unpacks past the bound is refused
naming the entry, and nothing is stored. Relative folder names of a server path are taken inside IMPORT_ROOTS."""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotator.collections.services import collection_import, collection_import_run
from annotator.collections.uploads import UploadRefused, collection_upload
from annotator.jobs.services import UnitRef
from annotator.models import Collection, Job, JobTask
from subtlebench.errors import Invalid
from tests.collection_fixtures import levir_folder

pytestmark = pytest.mark.django_db

FORM = {"name": "levir_up", "domain": "aerial", "layout": "auto"}


def zipped(folder: Path, *, top: str = "levir", extra: dict | None = None) -> bytes:
    """The folder's files in a zip under one top folder (as zipping a folder does), plus `extra` {name: bytes}."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, f"{top}/{path.relative_to(folder)}")
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


def run_import(job: Job) -> Job:
    """No worker runs here: run the job's unit as a worker would."""
    unit = JobTask.objects.get(job=job)
    collection_import_run(**unit.kwargs, unit=UnitRef(unit.pk, worker="test"))
    job.refresh_from_db()
    return job


def uploaded_files(settings) -> list[Path]:
    root = Path(settings.COLLECTION_UPLOAD_DIR)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_a_zip_uploaded_on_the_page_is_imported_as_a_collection(tmp_path, client_for, coordinator, settings):
    data = zipped(levir_folder(tmp_path / "src"), extra={"__MACOSX/levir/._A": b"junk"})
    response = client_for(coordinator).post(
        "/collections/upload/",
        {**FORM, "files": SimpleUploadedFile("levir.zip", data, "application/zip")},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 200, response.content
    job = run_import(Job.objects.get(pk=response.json()["job"]))
    assert job.status == "succeeded", job.errors
    collection = Collection.objects.get(name="levir_up")
    assert collection.layout == "change_detection"
    assert sorted(collection.images.values_list("original_name", flat=True)) == [
        "A/train_1.png",
        "A/train_2.png",
        "B/train_1.png",
        "B/train_2.png",
    ], "the zip's top folder is dropped; the __MACOSX junk is not imported"
    assert Path(job.result["source"]).is_relative_to(Path(settings.COLLECTION_UPLOAD_DIR))


def test_a_folder_upload_keeps_its_relative_paths(tmp_path, coordinator, settings):
    source = levir_folder(tmp_path / "src")
    files = sorted(p for p in source.rglob("*") if p.is_file())
    uploads = [SimpleUploadedFile(p.name, p.read_bytes()) for p in files]
    paths = [f"chosen/{p.relative_to(source)}" for p in files]
    job = run_import(collection_upload(files=uploads, paths=paths, **FORM, created_by=coordinator))
    assert job.status == "succeeded", job.errors
    stored = {str(p.relative_to(Path(job.result["source"]))) for p in uploaded_files(settings)}
    assert stored == {str(p.relative_to(source)) for p in files}, "the chosen folder's name is dropped, the rest kept"
    assert Collection.objects.get(name="levir_up").candidates.count() == 2


@pytest.mark.parametrize(
    "entry",
    ["../escape.png", "/etc/passwd", "levir/../../up.png", "C:/windows/x.png", "..\\\\evil.png"],
)
def test_a_zip_entry_that_leaves_its_folder_is_refused_by_name_and_nothing_is_stored(
    tmp_path, coordinator, settings, entry
):
    data = zipped(levir_folder(tmp_path / "src"), extra={entry: b"x"})
    with pytest.raises(UploadRefused, match="points outside the collection's folder") as refused:
        collection_upload(files=[SimpleUploadedFile("bad.zip", data)], **FORM, created_by=coordinator)
    assert repr(entry) in refused.value.detail or entry in refused.value.detail
    assert uploaded_files(settings) == [] and not Job.objects.exists()


def test_a_symlink_in_a_zip_is_refused_naming_it(tmp_path, coordinator, settings):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("A/ok.png", b"x")
        link = zipfile.ZipInfo("A/link.png")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(UploadRefused, match="'A/link.png' is a symbolic link"):
        collection_upload(files=[SimpleUploadedFile("l.zip", buffer.getvalue())], **FORM, created_by=coordinator)
    assert uploaded_files(settings) == []


def test_a_zip_past_the_unpacked_or_file_bound_is_refused(tmp_path, coordinator, settings):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("A/one.png", b"\0" * 5000)
        archive.writestr("A/two.png", b"\0" * 5000)
    data = buffer.getvalue()
    assert len(data) < 1000, "it compresses well: only the unpacked size is over"
    settings.COLLECTION_UPLOAD_MAX_UNPACKED_BYTES = 8000
    with pytest.raises(UploadRefused, match="more than 8000 bytes .* at the entry 'A/two.png'"):
        collection_upload(files=[SimpleUploadedFile("b.zip", data)], **FORM, created_by=coordinator)
    settings.COLLECTION_UPLOAD_MAX_UNPACKED_BYTES = 10**6
    settings.COLLECTION_UPLOAD_MAX_FILES = 1
    with pytest.raises(UploadRefused, match="more than 1 files"):
        collection_upload(files=[SimpleUploadedFile("b.zip", data)], **FORM, created_by=coordinator)
    assert uploaded_files(settings) == []


def test_an_upload_over_the_size_limit_is_refused_before_anything_is_stored(coordinator, client_for, settings):
    settings.COLLECTION_UPLOAD_MAX_BYTES = 100
    response = client_for(coordinator).post(
        "/collections/upload/",
        {**FORM, "files": SimpleUploadedFile("big.zip", b"x" * 5000)},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 400
    assert "over the limit of 100 bytes (COLLECTION_UPLOAD_MAX_BYTES)" in response.json()["detail"]
    assert uploaded_files(settings) == []


def test_uploads_turned_off_are_refused_with_a_clear_message(tmp_path, coordinator, client_for, settings):
    settings.COLLECTION_UPLOAD_DIR = ""
    page = client_for(coordinator).get("/collections/")
    assert b"Uploads from the browser are turned off on this server" in page.content
    data = zipped(levir_folder(tmp_path / "src"))
    with pytest.raises(UploadRefused, match="COLLECTION_UPLOAD_DIR"):
        collection_upload(files=[SimpleUploadedFile("l.zip", data)], **FORM, created_by=coordinator)


def test_the_upload_view_refuses_anonymous_others_and_gets(client, client_for, annotator):
    assert client.post("/collections/upload/").status_code == 302
    assert client_for(annotator).post("/collections/upload/").status_code == 403
    assert client_for(annotator).put("/collections/upload/").status_code in (403, 405)


def test_with_media_in_s3_the_upload_goes_to_the_bucket_for_any_worker(tmp_path, coordinator, s3_storage):
    data = zipped(levir_folder(tmp_path / "src"))
    job = collection_upload(files=[SimpleUploadedFile("l.zip", data)], **FORM, created_by=coordinator)
    assert job.result["source"].startswith(f"s3://{s3_storage}/media/uploads/collections/")
    job = run_import(job)
    assert job.status == "succeeded", job.errors
    assert Collection.objects.get(name="levir_up").images.count() == 4


def test_a_relative_folder_name_is_taken_inside_the_import_folders(tmp_path, coordinator):
    levir_folder(tmp_path / "sets" / "levir")
    job = collection_import(source="sets/levir", name="levir_rel", domain="aerial", sync=True)
    assert job.status == "succeeded", job.errors
    assert Path(job.result["source"]) == Path("sets/levir")
    with pytest.raises(Invalid, match="outside the import folders"):
        collection_import(source="../", name="levir_out", domain="aerial", sync=True)
