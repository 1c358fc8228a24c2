"""Image collections uploaded from the browser: a zip, or the files of a folder with their relative paths.

The upload is checked whole before anything is written (the operator allows uploads, COLLECTION_UPLOAD_DIR; the
size, COLLECTION_UPLOAD_MAX_BYTES; the number of files, COLLECTION_UPLOAD_MAX_FILES; for a zip, no entry that
leaves its folder, no symlink, and at most COLLECTION_UPLOAD_MAX_UNPACKED_BYTES unpacked, counted as it unpacks,
not taken from the zip's own header). It is then stored where every worker reads it, as video uploads are: with
media in S3 in the bucket (under S3_PREFIX/uploads/collections/), else in a new folder of COLLECTION_UPLOAD_DIR,
and imported by the same job as a server path (annotator/collections/services.py: the same checks, the same
layouts). A failure while storing removes what it stored.
"""

from __future__ import annotations

import posixpath
import shutil
import stat
import tempfile
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.utils import timezone

from annotator.collections.services import collection_check, collection_import
from annotator.jobs.services import job_for_key
from annotator.models import Job
from subtlebench.errors import Invalid, file_error_detail
from subtlebench.storage import media_in_bucket

JUNK = (".DS_Store", "Thumbs.db")  # what file browsers add (archivers add __MACOSX/): never images
CHUNK = 1024 * 1024


class UploadRefused(Invalid):
    """The upload as a whole is refused; the message names the file or entry and why. Nothing was stored."""

    def __init__(self, message: str):
        super().__init__({"files": [message]})


def uploads_allowed() -> Path | None:
    """The folder uploads land in, when the operator allows them and it lies inside IMPORT_ROOTS; None otherwise."""
    raw = settings.COLLECTION_UPLOAD_DIR
    if not raw:
        return None
    folder = Path(raw).resolve()
    roots = [Path(root).resolve() for root in settings.IMPORT_ROOTS]
    if not any(folder == root or folder.is_relative_to(root) for root in roots):
        return None
    return folder


def uploads_refusal() -> str:
    if uploads_allowed() is not None or media_in_bucket() and settings.COLLECTION_UPLOAD_DIR:
        return ""
    return (
        "Uploads from the browser are turned off on this server: the operator allows them with COLLECTION_UPLOAD_DIR "
        "(a folder inside IMPORT_ROOTS). Import a folder the server can read instead."
    )


@dataclass
class Member:
    """One file of the upload: its path inside the collection and how to read it."""

    path: str
    size: int
    open: object  # () -> a binary file object


def clean_member_path(raw: str, *, where: str) -> str | None:
    """The entry's path inside the collection, or None for a folder or junk; UploadRefused when it would leave the
    collection's folder (an absolute path, '..', a drive letter). A backslash separates folders, as Windows writes."""
    name = raw.replace("\\", "/")
    if not name or name.endswith("/"):
        return None
    parts = PurePosixPath(name).parts
    if name.startswith("/") or ".." in parts or ":" in parts[0] or "\x00" in name:
        raise UploadRefused(f"{where}: the entry {raw!r} points outside the collection's folder; nothing was stored.")
    if parts[0] == "__MACOSX" or parts[-1] in JUNK:
        return None
    return posixpath.normpath(name)


def _strip_common_folder(members: list[Member]) -> list[Member]:
    """A zip of one folder, or a folder chosen in the browser: its files, below that folder."""
    tops = {member.path.split("/", 1)[0] for member in members}
    if len(tops) == 1 and all("/" in member.path for member in members):
        for member in members:
            member.path = member.path.split("/", 1)[1]
    return members


def zip_members(upload) -> list[Member]:
    """The files of an uploaded zip, checked: UploadRefused naming the bad entry."""
    where = upload.name
    try:
        archive = zipfile.ZipFile(upload)
    except (zipfile.BadZipFile, OSError) as error:
        raise UploadRefused(f"{where} is not a readable zip file ({error}); nothing was stored.") from None
    members: list[Member] = []
    unpacked = 0
    for info in archive.infolist():
        mode = info.external_attr >> 16
        path = clean_member_path(info.filename, where=where)
        if path is None:
            continue
        if stat.S_ISLNK(mode):
            raise UploadRefused(f"{where}: the entry {info.filename!r} is a symbolic link; nothing was stored.")
        if info.flag_bits & 0x1:
            raise UploadRefused(f"{where}: the entry {info.filename!r} is encrypted; nothing was stored.")
        unpacked += info.file_size
        if len(members) + 1 > settings.COLLECTION_UPLOAD_MAX_FILES:
            raise UploadRefused(
                f"{where} holds more than {settings.COLLECTION_UPLOAD_MAX_FILES} files (COLLECTION_UPLOAD_MAX_FILES); "
                "nothing was stored."
            )
        if unpacked > settings.COLLECTION_UPLOAD_MAX_UNPACKED_BYTES:
            raise UploadRefused(
                f"{where}: unpacked, it is more than {settings.COLLECTION_UPLOAD_MAX_UNPACKED_BYTES} bytes "
                f"(COLLECTION_UPLOAD_MAX_UNPACKED_BYTES), at the entry {info.filename!r}; nothing was stored."
            )
        members.append(Member(path=path, size=info.file_size, open=lambda info=info: archive.open(info)))
    if len(members) != len({member.path for member in members}):
        seen: set[str] = set()
        twice = next(member.path for member in members if member.path in seen or seen.add(member.path))
        raise UploadRefused(f"{where}: the entry {twice!r} is in the zip twice; nothing was stored.")
    return _strip_common_folder(members)


def folder_members(files, paths: list[str]) -> list[Member]:
    """The files of a folder chosen in the browser, each at its relative path (`paths`, in the files' order)."""
    if len(files) > settings.COLLECTION_UPLOAD_MAX_FILES:
        raise UploadRefused(
            f"The folder holds {len(files)} files, more than {settings.COLLECTION_UPLOAD_MAX_FILES} "
            "(COLLECTION_UPLOAD_MAX_FILES); nothing was stored."
        )
    members = []
    for index, upload in enumerate(files):
        raw = paths[index] if index < len(paths) and paths[index] else upload.name
        path = clean_member_path(raw, where="the folder")
        if path is not None:
            members.append(Member(path=path, size=upload.size, open=lambda upload=upload: upload.open("rb")))
    return _strip_common_folder(members)


def _copy_bounded(source, target, budget: list[int], member: Member) -> None:
    """Copy one member, counting what really comes out of it against the unpacked bound."""
    while chunk := source.read(CHUNK):
        budget[0] -= len(chunk)
        if budget[0] < 0:
            raise UploadRefused(
                f"The entry {member.path!r} unpacks to more than its zip header says, past "
                f"{settings.COLLECTION_UPLOAD_MAX_UNPACKED_BYTES} bytes (COLLECTION_UPLOAD_MAX_UNPACKED_BYTES); "
                "nothing was stored."
            )
        target.write(chunk)


def _store_local(members: list[Member], folder: Path) -> str:
    budget = [settings.COLLECTION_UPLOAD_MAX_UNPACKED_BYTES]
    try:
        for member in members:
            target = folder / member.path
            target.parent.mkdir(parents=True, exist_ok=True)
            with member.open() as source, target.open("wb") as handle:
                _copy_bounded(source, handle, budget, member)
    except UploadRefused:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except (OSError, zipfile.BadZipFile) as error:
        shutil.rmtree(folder, ignore_errors=True)
        raise UploadRefused(file_error_detail(error, what="Storing the upload", where=folder)) from error
    return str(folder)


def _store_bucket(members: list[Member], prefix: str) -> str:
    """Store each file in the media bucket; the import downloads the prefix on whichever worker runs it."""
    from botocore.exceptions import BotoCoreError, ClientError

    budget = [settings.COLLECTION_UPLOAD_MAX_UNPACKED_BYTES]
    stored: list[str] = []
    try:
        for member in members:
            name = f"{prefix}/{member.path}"
            with member.open() as source, tempfile.SpooledTemporaryFile(max_size=8 * CHUNK) as spool:
                _copy_bounded(source, spool, budget, member)
                spool.seek(0)
                default_storage.save(name, File(spool, name=name))
            stored.append(name)
    except (UploadRefused, ClientError, BotoCoreError, OSError, zipfile.BadZipFile) as error:
        for name in stored:
            default_storage.delete(name)
        if isinstance(error, UploadRefused):
            raise
        raise UploadRefused(f"Storing the upload in the bucket failed ({error}); nothing was kept.") from error
    return f"s3://{default_storage.bucket}/{default_storage.key(prefix)}"


def collection_upload(
    *,
    files,
    paths: list[str] | None = None,
    name: str,
    domain: str,
    layout: str = "auto",
    created_by=None,
    idempotency_key: str = "",
) -> Job:
    """Store an uploaded zip (one .zip file) or folder (its files and their relative `paths`) and import it as a
    collection: the job of collection_import. UploadRefused (400) names what is wrong; nothing is stored then."""
    refusal = uploads_refusal()
    if refusal:
        raise UploadRefused(refusal)
    existing = job_for_key(user=created_by, kind=Job.Kind.IMPORT, key=idempotency_key)
    if existing is not None:
        return existing
    files = list(files)
    if not files:
        raise UploadRefused("Choose a zip file or a folder of images to upload.")
    total = sum(upload.size for upload in files)
    if total > settings.COLLECTION_UPLOAD_MAX_BYTES:
        raise UploadRefused(
            f"The upload is {total} bytes, over the limit of {settings.COLLECTION_UPLOAD_MAX_BYTES} bytes "
            "(COLLECTION_UPLOAD_MAX_BYTES); nothing was stored."
        )
    is_zip = len(files) == 1 and files[0].name.lower().endswith(".zip")
    members = zip_members(files[0]) if is_zip else folder_members(files, paths or [])
    if not members:
        raise UploadRefused("The upload holds no files; nothing was stored.")
    batch = f"{timezone.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    if media_in_bucket():
        # The name, domain and layout are checked before anything is stored (the source is checked by the import).
        collection_check(source=f"s3://{default_storage.bucket}/check", name=name, domain=domain, layout=layout)
        source = _store_bucket(members, f"uploads/collections/{batch}")
    else:
        folder = uploads_allowed() / batch
        folder.mkdir(parents=True)
        try:
            collection_check(source=str(folder), name=name, domain=domain, layout=layout)
        except Invalid:
            folder.rmdir()
            raise
        source = _store_local(members, folder)
    return collection_import(
        source=source,
        name=name,
        domain=domain,
        layout=layout,
        created_by=created_by,
        idempotency_key=idempotency_key,
    )
