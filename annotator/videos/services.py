"""Video import and sampling services: what the import command, the upload page, the API and the Celery task
all call. A source (a folder of videos or a CSV manifest) becomes one import Job and one sampling step per
video; a bad file or row fails that video alone, with a message naming it, and never touches stored frames.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import logging
import math
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile, File
from django.core.files.storage import default_storage
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.text import get_valid_filename

from annotator.jobs.outages import outage_of
from annotator.jobs.scratch import scratch_file, scratch_folder
from annotator.jobs.services import (
    JobRun,
    JobTaskLost,
    TransferBeats,
    UnitRef,
    job_create_once,
    job_for_key,
    job_task_add,
    job_task_claim,
)
from annotator.models import (
    Domain,
    Frame,
    Image,
    ImageEmbedding,
    Job,
    JobCancelled,
    JobTask,
    Pair,
    PairDraft,
    ReleaseItem,
    Video,
)
from annotator.similarity.services import pending_images, video_queue_embeddings
from annotator.videos import sampling
from benchmark import jsonlimits
from subtlebench.errors import Conflict, Invalid, file_error_detail
from subtlebench.storage import media_in_bucket

logger = logging.getLogger(__name__)

VIDEO_EXTENSIONS = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts")
MANIFEST_COLUMNS = ("yt8m_id", "path", "labels")
LABEL_SEPARATORS = re.compile(r"[;|]")
YT8M_ID_MAX = Video._meta.get_field("yt8m_id").max_length
LABEL_MAX = Video._meta.get_field("labels").base_field.max_length


class ImportSourceError(Invalid):
    """The whole source is unusable (outside IMPORT_ROOTS, missing, no videos, a manifest without its header)."""


class ImportPathError(ValueError):
    """One path is unusable; the message is a predicate that reads after the path ('does not exist')."""


@dataclass
class ImportEntry:
    """One video to import: from a folder, a manifest row or an upload. `error` set: known bad already."""

    label: str
    yt8m_id: str
    source: str
    labels: list[str] = field(default_factory=list)
    title: str = ""
    error: str = ""


def resolve_import_path(raw: str | Path, *, base: Path | None = None) -> Path:
    """The real path (symlinks and '..' resolved) of an existing file or folder inside settings.IMPORT_ROOTS.

    A relative path is taken inside `base` when given (a manifest's folder); else inside the import folders, the
    first one where it exists (then the working directory, for a command typed in a shell). Wherever it leads, it
    must stay inside IMPORT_ROOTS: `../x` out of a root is refused."""
    path = Path(raw).expanduser()
    if not path.is_absolute():
        if base is not None:
            path = base / path
        else:
            tries = [Path(root) / path for root in settings.IMPORT_ROOTS] + [Path.cwd() / path]
            path = next((place for place in tries if place.exists()), tries[0])
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError, ValueError) as error:  # RuntimeError: a symlink loop; ValueError: a NUL byte
        raise ImportPathError(f"cannot be resolved ({error})") from error
    roots = [Path(root).resolve() for root in settings.IMPORT_ROOTS]
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        leads = f": it leads to {resolved}" if Path(os.path.normpath(path)) != resolved else ""
        raise ImportPathError(
            "is outside the import folders (IMPORT_ROOTS: " + ", ".join(str(root) for root in roots) + f"){leads}"
        )
    if not resolved.exists():
        raise ImportPathError("does not exist")
    return resolved


def sampling_parameters(every: float | None = None, count: int | None = None) -> tuple[float | None, int | None]:
    """(every, count) with exactly one set: the default is one frame every DEFAULT_SAMPLE_EVERY_SECONDS."""
    if every is not None and count is not None:
        raise Invalid("Give either every (seconds between frames) or frames (a count), not both.")
    if count is not None:
        if count < 1:
            raise Invalid({"frames": ["must be at least 1."]})
        return None, int(count)
    every = settings.DEFAULT_SAMPLE_EVERY_SECONDS if every is None else float(every)
    if every <= 0:
        raise Invalid({"every": ["must be a positive number of seconds."]})
    return every, None


# --- Reading a source into entries --------------------------------------------------------------------------


def import_entries(source: str) -> list[ImportEntry]:
    """The entries of a folder of video files or of a CSV manifest; ImportSourceError when it has none."""
    try:
        path = resolve_import_path(source)
    except ImportPathError as error:
        raise ImportSourceError(f"{source} {error}") from error
    if path.is_dir():
        entries = entries_from_folder(path)
        if not entries:
            raise ImportSourceError(f"{source} contains no video files ({', '.join(VIDEO_EXTENSIONS)})")
        return entries
    if path.suffix.lower() == ".csv":
        entries = entries_from_manifest(path)
        if not entries:
            raise ImportSourceError(f"{source} has a header but no rows")
        return entries
    raise ImportSourceError(f"{source} is neither a folder of videos nor a .csv manifest")


def entries_from_folder(folder: Path) -> list[ImportEntry]:
    """Every video file directly in the folder; its yt8m_id is the file name without its extension."""
    entries, seen = [], set()
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.suffix.lower() not in VIDEO_EXTENSIONS:
            continue
        entry = ImportEntry(label=path.name, yt8m_id=path.stem, source=str(path), title=path.name)
        if len(path.stem) > YT8M_ID_MAX:
            entry.error = f"{path}: the file name is longer than {YT8M_ID_MAX} characters, too long for a yt8m_id"
            entry.yt8m_id = ""
        elif path.stem in seen:
            entry.error = f"{path}: another file in this folder already has the yt8m_id {path.stem!r}"
            entry.yt8m_id = ""
        else:
            try:
                entry.source = str(resolve_import_path(path))
            except ImportPathError as error:
                entry.error = f"{path} {error}"
        seen.add(path.stem)
        entries.append(entry)
    return entries


def entries_from_manifest(manifest: Path) -> list[ImportEntry]:
    """Rows of a CSV with the header yt8m_id,path,labels. Paths are local (relative to the manifest's
    folder, inside IMPORT_ROOTS) or s3://bucket/key; labels are separated by ';' or '|'."""
    try:
        with manifest.open("rb") as handle:
            reader = csv.DictReader(_manifest_lines(manifest, handle))
            header = [name.strip() for name in reader.fieldnames or []]
            missing = [name for name in MANIFEST_COLUMNS if name not in header]
            if missing:
                raise ImportSourceError(
                    f"{manifest}, line 1: the header must be {','.join(MANIFEST_COLUMNS)}; "
                    f"missing column {', '.join(missing)}"
                )
            reader.fieldnames = header
            entries, seen = [], {}
            for row in reader:
                entries.append(_manifest_entry(manifest, reader.line_num, row, seen))
    except csv.Error as error:
        line = f", line {reader.line_num}" if reader.line_num else ""
        raise ImportSourceError(f"{manifest}{line} is not a valid CSV file ({error})") from error
    return entries


def _manifest_lines(manifest: Path, handle) -> Iterator[str]:
    """The manifest's lines for the CSV reader, each read within IMPORT_MAX_LINE_BYTES and checked for UTF-8: a bad
    line refuses the whole manifest (its rows cannot be trusted), naming the line and the byte."""
    lines = jsonlimits.text_lines(
        handle, max_bytes=settings.IMPORT_MAX_LINE_BYTES, limit_name="IMPORT_MAX_LINE_BYTES", allow_bom=True
    )
    for number, line, error in lines:
        if error:
            raise ImportSourceError(f"{manifest}, line {number}: {error}")
        yield line + "\n"


def _manifest_entry(manifest: Path, line: int, row: dict, seen: dict[str, int]) -> ImportEntry:
    where = f"{manifest.name}, line {line}"
    absent = [name for name in MANIFEST_COLUMNS if row.get(name) is None]
    if absent:
        return ImportEntry(where, "", "", error=f"{where}: missing column {', '.join(absent)}")
    if nul := next((name for name in MANIFEST_COLUMNS if "\0" in row[name]), None):  # no file name or id holds one
        return ImportEntry(where, "", "", error=f"{where}, field {nul}: holds a NUL byte (U+0000)")
    yt8m_id, raw_path = row["yt8m_id"].strip(), row["path"].strip()
    labels = [label.strip() for label in LABEL_SEPARATORS.split(row["labels"]) if label.strip()]
    entry = ImportEntry(where, yt8m_id, raw_path, labels, title=raw_path.rsplit("/", 1)[-1])
    if not yt8m_id:
        entry.error = f"{where}, field yt8m_id: empty"
    elif len(yt8m_id) > YT8M_ID_MAX:
        entry.error = f"{where}, field yt8m_id: longer than {YT8M_ID_MAX} characters"
        entry.yt8m_id = ""
    elif yt8m_id in seen:
        entry.error = f"{where}, field yt8m_id: {yt8m_id!r} already appears on line {seen[yt8m_id]}"
        entry.yt8m_id = ""  # the first row owns this video: a duplicate must not mark it failed
    elif long_label := next((label for label in labels if len(label) > LABEL_MAX), None):
        entry.error = f"{where}, field labels: {long_label[:40]!r}... is longer than {LABEL_MAX} characters"
        entry.labels = []  # the video is marked failed without them: they do not fit its column
    elif not raw_path:
        entry.error = f"{where}, field path: empty"
    elif raw_path.startswith("s3://"):
        bucket, _, key = raw_path[len("s3://") :].partition("/")
        if not bucket or not key or key.endswith("/"):
            entry.error = f"{where}, field path: {raw_path!r} is not an s3://bucket/key URI of a file"
    else:
        try:
            path = resolve_import_path(raw_path, base=manifest.parent)
            if not path.is_file():
                raise ImportPathError("is not a file")
            entry.source = str(path)
        except ImportPathError as error:
            entry.error = f"{where}, field path: {raw_path} {error}"
    if yt8m_id and yt8m_id not in seen:
        seen[yt8m_id] = line
    return entry


# --- The import job -----------------------------------------------------------------------------------------


SAMPLE_TASK = "annotator.tasks.sample_video"


def videos_import(
    *,
    source: str | None = None,
    entries: list[ImportEntry] | None = None,
    every: float | None = None,
    count: int | None = None,
    domain: str = Domain.NATURAL,
    created_by=None,
    sync: bool = False,
    title: str = "",
    idempotency_key: str = "",
    progress=None,
) -> Job:
    """Start an import Job over a source (or prepared entries): bad entries fail at once, each good one becomes a
    unit (annotator.models.JobTask) sampled by a Celery task queued on commit, or in this process when `sync`.

    The job and its units are one transaction: with the broker away the job waits, its units pending, until the
    sweeper queues them. The same `idempotency_key` from the same user returns the job it made the first time.
    """
    every, count = sampling_parameters(every, count)
    if domain not in Domain.values:
        raise Invalid({"domain": [f"unknown domain {domain!r} (one of {', '.join(Domain.values)})."]})
    if entries is None:
        entries = import_entries(source)
    create = partial(_import_create, source, entries, every, count, domain, created_by, sync, title, idempotency_key)
    job, created = job_create_once(create, user=created_by, kind=Job.Kind.IMPORT, key=idempotency_key)
    if created and sync:
        units = list(job.tasks.filter(status=JobTask.Status.PENDING))
        if progress is not None:  # a terminal's bar (the job row counts every outcome itself)
            progress.start(len(units))
        for unit in units:
            video_sample(**unit.kwargs, unit=UnitRef(unit.pk, worker="this process"))
            if progress is not None:
                progress.advance(1)
    job.refresh_from_db()
    return job


@transaction.atomic
def _import_create(source, entries, every, count, domain, created_by, sync, title, idempotency_key) -> Job:
    job = Job.objects.create(
        kind=Job.Kind.IMPORT,
        title=title or f"Import {source}",
        created_by=created_by,
        idempotency_key=idempotency_key,
        result={
            "source": source or "",
            "every": every,
            "frames_per_video": count,
            "videos_ok": 0,
            "videos_skipped": 0,
            "videos_failed": 0,
            "frames": 0,
            "seconds": 0.0,
        },
    )
    job.start(total=len(entries))
    for entry in entries:
        if entry.error:
            _entry_fail(job.pk, entry, domain)
            continue
        video, _ = Video.objects.get_or_create(
            yt8m_id=entry.yt8m_id,
            defaults={"source": entry.source, "labels": entry.labels, "domain": domain, "title": entry.title},
        )
        step = {
            "job_id": job.pk,
            "video_id": video.pk,
            "source": entry.source,
            "every": every,
            "count": count,
            "labels": entry.labels,
            "domain": domain,
            "title": entry.title,
        }
        job_task_add(job=job, name=SAMPLE_TASK, kwargs=step, send=not sync)
    return job


def _entry_fail(job_id: int, entry: ImportEntry, domain: str) -> None:
    """A bad entry: a new video is recorded as failed; a video that has frames keeps them untouched."""
    if entry.yt8m_id:
        video, created = Video.objects.get_or_create(
            yt8m_id=entry.yt8m_id,
            defaults={
                "source": entry.source,
                "labels": entry.labels,
                "domain": domain,
                "title": entry.title,
                "status": Video.Status.FAILED,
                "error": entry.error,
            },
        )
        if not created:
            video.mark_failed(entry.error)
    _job_record(job_id, outcome="videos_failed", error=entry.error)


def _job_record(
    job_id: int,
    *,
    outcome: str,
    frames: int = 0,
    seconds: float = 0.0,
    error: str = "",
    run: JobRun | None = None,
    unit_status: str = JobTask.Status.DONE,
) -> bool:
    """Count one video's outcome; the step that completes the job finishes it. The row lock serialises the
    workers of one job, so no count is lost and the job is finished exactly once; the unit's completion in the
    same transaction makes a redelivered unit count nothing twice (False: not counted)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if run is not None and not run.complete(unit_status):
            return False
        if not job.is_active:  # cancelled meanwhile: the work is kept, the count of a cancelled job is not
            return False
        result = dict(job.result)
        result[outcome] = result.get(outcome, 0) + 1
        result["frames"] = result.get("frames", 0) + frames
        result["seconds"] = round(result.get("seconds", 0.0) + seconds, 3)
        job.result = result
        job.save(update_fields=["result"])
        job.advance(1, error=error or None)
        if job.done >= job.total and not job.tasks.filter(status__in=OPEN_UNITS).exists():
            nothing = result.get("videos_ok", 0) + result.get("videos_skipped", 0) == 0
            job.finish(result, error="No video could be imported." if nothing else None)
    return True


OPEN_UNITS = (JobTask.Status.PENDING, JobTask.Status.QUEUED, JobTask.Status.RUNNING)


def video_sample_abandon(*, run: JobRun, kwargs: dict, reason: str) -> bool:
    """The sweeper gives up a sampling unit whose workers kept vanishing: the video fails (unless it has frames),
    and the unit is counted as failed on its job. Called in a transaction."""
    video = Video.objects.select_for_update().filter(pk=kwargs["video_id"]).first()
    message = f"{video.yt8m_id if video else kwargs['video_id']}: {kwargs.get('source', '')}: {reason}"
    counted = _job_record(
        kwargs["job_id"], outcome="videos_failed", error=message, run=run, unit_status=JobTask.Status.FAILED
    )
    if counted and video is not None:
        video.mark_failed(message)
    return counted


# --- Sampling one video -------------------------------------------------------------------------------------


class ResampleRefused(Exception):
    pass


DATABASE_ERRORS = (OperationalError, InterfaceError)


def video_sample(
    *,
    job_id: int,
    video_id: int,
    source: str,
    every: float | None,
    count: int | None,
    labels: list[str],
    domain: str,
    title: str = "",
    unit: UnitRef | None = None,
) -> str:
    """Sample one video into frames and count the outcome on its job: 'ok', 'skipped', 'failed' (or 'taken': this
    delivery found its unit claimed, done or cancelled, and did nothing).

    Already sampled from the same file with the same parameters: skipped (a repeated task or re-import
    changes no frame; only corrected labels or domain are taken over). Otherwise the new frames are written
    to storage first and swapped in for the old ones in one transaction, which also counts the outcome and ends
    the unit; a failure before that commit removes the new files and leaves the old frames as they were. Files
    of committed frames are never removed here; with the database gone mid-commit the files stay (unreferenced
    ones are removed by the clean-up after its grace period) and the task retries.
    """
    run = None
    if unit is not None and unit.unit_id is not None:
        run = job_task_claim(unit=unit)
        if run is None:
            return "taken"
    video = Video.objects.get(pk=video_id)
    # A video sampled the same way is skipped, unless its frame files are gone: then it is sampled again.
    if video.is_sampled_as(source=source, every=every, count=count) and video_check_files(video=video):
        if (video.labels, video.domain) != (labels, domain):  # a re-import may correct the metadata alone
            Video.objects.filter(pk=video_id).update(labels=labels, domain=domain, updated=timezone.now())
        _job_record(job_id, outcome="videos_skipped", run=run)
        return "skipped"
    # Frame files lost from storage come back by sampling again when that reproduces them exactly; the pairs on
    # them stay as they are. Only a video whose frames cannot be reproduced and that nothing uses is sampled anew.
    if video.status == Video.Status.MISSING and video.frame_count and video.is_sampled_from(source, every, count):
        restored = video_restore_frames(video=video, job_id=job_id, run=run)
        if restored is not None:
            return restored
    if video.status != Video.Status.SAMPLED:
        fields = {"source": source, "labels": labels, "domain": domain, "title": title or video.title}
        Video.objects.filter(pk=video_id).update(**fields)
        video.refresh_from_db()
        video.mark_sampling()
    started = time.monotonic()
    written: list[str] = []
    try:
        _check_no_pairs(video)
        with local_video_file(source, run=run) as path:
            info, frames = sampling.sample(
                path,
                every=every,
                count=count,
                max_side=settings.FRAME_MAX_SIDE,
                thumbnail_side=settings.THUMBNAIL_MAX_SIDE,
                quality=settings.FRAME_JPEG_QUALITY,
            )
            run_folder = uuid.uuid4().hex[:8]  # a fresh folder per run: the old frames' files stay until the swap
            sampled = []
            for frame in frames:
                if run is not None:
                    run.beat()  # also stops here when the job was cancelled
                name = f"frames/{video.yt8m_id}/{run_folder}/{frame.index:06d}"
                image_name = _save_frame_file(f"{name}.jpg", frame.jpeg)
                written.append(image_name)
                thumbnail_name = _save_frame_file(f"{name}_thumb.jpg", frame.thumbnail)
                written.append(thumbnail_name)
                sampled.append((frame, image_name, thumbnail_name, hashlib.sha256(frame.jpeg).hexdigest()))
        counted = _video_replace_frames(
            video_id,
            info,
            sampled,
            source=source,
            every=every,
            count=count,
            labels=labels,
            domain=domain,
            job_id=job_id,
            run=run,
            seconds=time.monotonic() - started,
        )
    except DATABASE_ERRORS:
        raise  # the commit's fate is unknown: keep every file, let the task retry (see the docstring)
    except JobCancelled as stop:
        _delete_files(written)
        logger.info("sampling %s stopped: %s", video.yt8m_id, stop)
        if isinstance(stop, JobTaskLost):  # another run of this unit samples the video now: leave it to that one
            return "taken"
        with transaction.atomic():
            Video.objects.select_for_update().get(pk=video_id).mark_failed(f"{video.yt8m_id}: sampling was cancelled")
            if run is not None:
                run.cancel()
        return "cancelled"
    except Exception as error:  # any failure fails this video alone; the import goes on
        _delete_files(written)
        if outage_of(error) is not None:
            # The storage (or the broker) is away, not this video: the task pauses the unit with the reason and
            # samples it again when it is back (annotator.jobs.services.job_task_failed).
            raise
        if isinstance(error, sampling.SamplingError | ImportPathError | ResampleRefused):
            message = f"{video.yt8m_id}: {source} {error}"
        elif isinstance(error, OSError):  # a full disk, a missing or read-only media folder: say which, in one line
            where = getattr(default_storage, "location", None)
            message = f"{video.yt8m_id}: {file_error_detail(error, what=f'sampling {source}', where=where)}"
        else:
            logger.exception("sampling %s (%s) failed", video.yt8m_id, source)
            message = f"{video.yt8m_id}: {source}: sampling failed ({type(error).__name__}: {error})"
        with transaction.atomic():
            Video.objects.select_for_update().get(pk=video_id).mark_failed(message)
            _job_record(job_id, outcome="videos_failed", error=message, run=run)
        return "failed"
    if not counted:  # the unit was taken over, or the job cancelled, meanwhile: these files are nobody's
        _delete_files(written)
        if run is not None:
            run.cancel()
        return "taken"
    return "ok"


def _save_frame_file(name: str, data: bytes) -> str:
    """Store one frame file. A write that fails (a full disk) leaves the part it wrote under the final name, which
    no list of written files holds yet: it is removed at once, so no truncated frame stays for the clean-up."""
    try:
        return default_storage.save(name, ContentFile(data))
    except BaseException:
        _delete_files([name])  # the run's folder is new: a file of this name can only be this write's
        raise


def _check_no_pairs(video: Video) -> None:
    used = Pair.objects.filter(Q(image_1__frame__video=video) | Q(image_2__frame__video=video)).count()
    if used:
        raise ResampleRefused(
            f"was not re-sampled: {used} pair(s) use its current frames, and new frames would orphan them"
        )
    released = released_frame_items(video)
    if released:
        raise ResampleRefused(f"was not re-sampled: {released}")


def released_frame_items(video: Video) -> str:
    """Why a video's frames must stay because releases hold them (a release keeps its images for good), or ''.

    A pair that uses them is refused already; this covers a released pair whose images were changed since."""
    used = (
        ReleaseItem.objects.filter(Q(image_1__frame__video=video) | Q(image_2__frame__video=video))
        .order_by()
        .values_list("release__number", flat=True)
        .distinct()
    )
    names = ", ".join(f"v{number}" for number in sorted(used))
    return f"release(s) {names} hold items of its current frames, and a release never changes" if names else ""


class UnitTaken(Exception):
    """Another run of the unit took it over while this one sampled: roll back, count nothing."""


def _video_replace_frames(
    video_id, info, sampled, *, source, every, count, labels, domain, job_id, run, seconds
) -> bool:
    """Swap the new frames in, count the outcome and end the unit, all in one transaction. False: the unit was no
    longer this run's (nothing was written)."""
    try:
        with transaction.atomic():
            _swap_frames(video_id, info, sampled, source=source, every=every, count=count, labels=labels, domain=domain)
            if not _job_record(job_id, outcome="videos_ok", frames=len(sampled), seconds=seconds, run=run):
                if run is not None:
                    raise UnitTaken
    except UnitTaken:
        return False
    return True


def _swap_frames(video_id, info, sampled, *, source, every, count, labels, domain) -> None:
    video = Video.objects.select_for_update().get(pk=video_id)
    _check_no_pairs(video)
    old = Image.objects.filter(frame__video=video)
    old_names = [name for pair in old.values_list("file", "thumbnail") for name in pair if name]
    old.delete()  # cascades to the frames
    images = Image.objects.bulk_create(
        Image(
            file=image_name,
            thumbnail=thumbnail_name,
            width=frame.width,
            height=frame.height,
            source="yt8m",
            original_name=f"{video.yt8m_id}_{frame.index:06d}.jpg",
            sha256=sha256,
        )
        for frame, image_name, thumbnail_name, sha256 in sampled
    )
    Frame.objects.bulk_create(
        Frame(video=video, index=frame.index, timestamp=frame.timestamp, pts=frame.pts, image=image)
        for (frame, *_), image in zip(sampled, images, strict=True)
    )
    video.source = source
    video.labels = labels
    video.domain = domain
    video.duration = info.duration
    video.fps = info.fps
    video.width = info.width
    video.height = info.height
    video.size_bytes = info.size_bytes
    video.sample_every = every
    video.sample_count = count
    video.frame_count = len(sampled)
    video.status = Video.Status.SAMPLED
    video.error = ""
    video.save()
    # Drafts name frames by index: on new frames the same numbers are other frames.
    PairDraft.objects.filter(video=video).delete()
    # The old frames' files go once the new rows are committed; a failure to delete leaves them to the clean-up.
    transaction.on_commit(partial(_delete_files, old_names), robust=True)
    # Every frame is embedded once, on the similarity worker, as soon as the video is sampled (an outbox unit:
    # a broker that is away leaves it pending, it never undoes these frames).
    video_queue_embeddings(video=video)


def _delete_files(names: list[str]) -> None:
    """Remove files no committed row references; one that cannot be removed is left to the clean-up."""
    for name in names:
        try:
            default_storage.delete(name)
        except Exception:  # a storage hiccup must not fail the work this follows
            logger.warning("could not remove %s; the clean-up will", name, exc_info=True)


# --- Missing files and orphans ---------------------------------------------------------------------------------


def video_check_files(*, video: Video) -> bool:
    """True when every frame file of the video is in storage; else a sampled video is marked `missing` (never
    leased; a re-import or `manage.py repair` samples it again) with what is gone, and False."""
    missing = video.missing_files()
    if not missing:
        return True
    with transaction.atomic():
        locked = Video.objects.select_for_update().get(pk=video.pk)
        if locked.status == Video.Status.SAMPLED:
            locked.mark_missing(missing)
            logger.error("%s", locked.error)
    video.refresh_from_db()
    return False


# --- Restoring lost frame files -----------------------------------------------------------------------------------


class FramesDiffer(Exception):
    """Sampling the source again does not give the stored frames; the message says which differ and how."""


def video_restore_frames(*, video: Video, job_id: int, run: JobRun | None = None) -> str | None:
    """Write a `missing` video's lost frame files back by sampling its source again with its own parameters, and
    count the outcome on its job: 'ok', 'failed', 'taken' or 'cancelled'; None when its frames cannot be reproduced
    and nothing uses them (the caller samples it anew, as a first import would).

    Restored only when verified: the source has the size, duration, rate and picture size it had, every frame comes
    at the stored pts and timestamp, and every frame's JPEG has the stored sha256, byte for byte (decoding with
    PyAV and encoding with Pillow are deterministic for one file, one ffmpeg/libjpeg build and the same
    FRAME_MAX_SIDE and FRAME_JPEG_QUALITY). Pixels alone are not enough: the lost bytes are what the stored hash,
    releases and export manifests name. Then only the missing files are written, under their stored names: the
    Image and Frame rows, the pairs, drafts and embeddings on them do not change. When anything differs and pairs
    or releases use the frames, nothing is changed: the video stays `missing` with the frames that differ named.
    """
    started = time.monotonic()
    # Picked frames come from no sampling run: there is nothing to reproduce them by (see frame_at.py).
    stored = {
        frame.index: frame
        for frame in video.frames.filter(picked=False).select_related("image").order_by("index", "pk")
    }
    missing = set(video.missing_files())
    try:
        # Under SCRATCH_ROOT, in the clean-up's ledger: a killed worker's reproduced frames do not stay behind.
        with scratch_folder("restore-frames", owner=run) as folder:
            reproduced = _reproduce_frames(video, stored, missing, Path(folder), run)
            restored = _write_back(reproduced, missing)
        counted = _restore_commit(video.pk, job_id, run, restored, seconds=time.monotonic() - started)
    except JobCancelled as stop:
        logger.info("restoring %s stopped: %s", video.yt8m_id, stop)
        if isinstance(stop, JobTaskLost):
            return "taken"
        if run is not None:
            with transaction.atomic():
                run.cancel()
        return "cancelled"
    except (FramesDiffer, sampling.SamplingError, ImportPathError, OSError) as error:
        used = frames_in_use(video)
        if not used:
            logger.info("%s cannot be restored (%s); nothing uses its frames: sampling it anew", video.yt8m_id, error)
            return None
        if isinstance(error, OSError) and not isinstance(error, FileNotFoundError):
            error = file_error_detail(error, what="restoring", where=getattr(default_storage, "location", None))
        message = (
            f"{video.yt8m_id}: {video.source} {error}; {used}, so nothing was changed: bring back the original "
            "video file (or the frame files from a backup) and run manage.py repair again"
        )
        with transaction.atomic():
            Video.objects.select_for_update().get(pk=video.pk).mark_not_restored(message)
            _job_record(job_id, outcome="videos_failed", error=message, run=run)
        return "failed"
    return "ok" if counted else "taken"


def _reproduce_frames(video: Video, stored: dict, missing: set[str], folder: Path, run) -> list[tuple]:
    """Sample the source again; FramesDiffer unless every frame is the stored one. Returns (image, jpeg file,
    thumbnail file) for each frame with a missing file, its bytes kept on local disk until all are verified."""
    with local_video_file(video.source, run=run) as path:
        info, frames = sampling.sample(
            path,
            every=video.sample_every,
            count=video.sample_count,
            max_side=settings.FRAME_MAX_SIDE,
            thumbnail_side=settings.THUMBNAIL_MAX_SIDE,
            quality=settings.FRAME_JPEG_QUALITY,
        )
        facts = [
            (name, now, then)
            for name, now, then in (
                ("bytes", info.size_bytes, video.size_bytes),
                ("seconds", info.duration, video.duration),
                ("fps", info.fps, video.fps),
                ("width", info.width, video.width),
                ("height", info.height, video.height),
            )
            if now != then
        ]
        if facts:
            frames.close()
            changed = ", ".join(f"{now} {name} (it was {then})" for name, now, then in facts)
            raise FramesDiffer(f"is not the file its frames were sampled from: it has {changed}")
        differ, seen, reproduced = [], set(), []
        for frame in frames:
            if run is not None:
                run.beat()  # also stops here when the job was cancelled
            seen.add(frame.index)
            old = stored.get(frame.index)
            digest = hashlib.sha256(frame.jpeg).hexdigest()
            if old is None:
                differ.append(f"frame {frame.index} at pts {frame.pts} is new")
            elif old.pts != frame.pts or not math.isclose(old.timestamp, frame.timestamp, abs_tol=1e-9):
                differ.append(
                    f"frame {frame.index} is at pts {frame.pts} ({frame.timestamp:.3f} s), stored at pts {old.pts} "
                    f"({old.timestamp:.3f} s)"
                )
            elif digest != old.image.sha256:
                differ.append(
                    f"frame {frame.index} at pts {frame.pts} has sha256 {digest[:12]}…, stored {old.image.sha256[:12]}…"
                )
            elif {old.image.file.name, old.image.thumbnail.name} & missing:
                jpeg, thumbnail = folder / f"{frame.index}.jpg", folder / f"{frame.index}_thumb.jpg"
                jpeg.write_bytes(frame.jpeg)
                thumbnail.write_bytes(frame.thumbnail)
                reproduced.append((old.image, jpeg, thumbnail))
        differ += [f"frame {index} was not sampled again" for index in sorted(set(stored) - seen)]
    if differ:
        listed = "; ".join(differ[:5]) + (f"; and {len(differ) - 5} more" if len(differ) > 5 else "")
        raise FramesDiffer(
            f"was sampled again and {len(differ)} of {len(stored)} frame(s) differ from the stored ones ({listed}): "
            "the file, the decoder or FRAME_MAX_SIDE / FRAME_JPEG_QUALITY changed since it was sampled"
        )
    return reproduced


def _write_back(reproduced: list[tuple], missing: set[str]) -> int:
    """Save each verified file under its stored name; returns the number of frames restored."""
    restored = 0
    for image, jpeg, thumbnail in reproduced:
        for name, file in ((image.file.name, jpeg), (image.thumbnail.name, thumbnail)):
            if name not in missing:
                continue
            with file.open("rb") as content:
                saved = default_storage.save(name, File(content))
            if saved != name:  # the name came back meanwhile (another repair): ours is a copy under another name
                _delete_files([saved])
        restored += 1
    return restored


def _restore_commit(video_id: int, job_id: int, run, restored: int, *, seconds: float) -> bool:
    try:
        with transaction.atomic():
            video = Video.objects.select_for_update().get(pk=video_id)
            if video.status == Video.Status.MISSING:
                video.mark_restored()
            # An embedding that failed while the files were gone is pending again, and the pending ones are queued.
            ImageEmbedding.objects.filter(image__frame__video=video, vector__isnull=True).delete()
            if pending_images(video=video).exists():
                video_queue_embeddings(video=video)
            if not _job_record(job_id, outcome="videos_ok", frames=restored, seconds=seconds, run=run):
                if run is not None:
                    raise UnitTaken
    except UnitTaken:
        return False
    return True


def frames_in_use(video: Video) -> str:
    """What holds the video's current frames (pairs on them, releases with items of them), or ''."""
    used = Pair.objects.filter(Q(image_1__frame__video=video) | Q(image_2__frame__video=video)).count()
    reasons = [f"{used} pair(s) use its frames"] if used else []
    released = released_frame_items(video)
    return "; ".join(reasons + ([released] if released else []))


def videos_repair(*, created_by=None, sync: bool = False) -> tuple[list[Video], Job | None]:
    """Check every sampled video's frame files, mark the incomplete ones `missing`, and re-sample every missing
    video from its source with its own parameters (one import job per sampling setting). Returns the videos found
    missing and the last job started.

    A `failed` video that still has frames (a repair before issue 25 failed videos whose frames pairs use) is
    checked too: with files missing it is `missing` again, and restored like the others."""
    for video in Video.objects.filter(status=Video.Status.SAMPLED).iterator():
        video_check_files(video=video)
    for video in Video.objects.filter(status=Video.Status.FAILED, frame_count__gt=0, frames__isnull=False).distinct():
        missing = video.missing_files()
        if missing:
            with transaction.atomic():
                locked = Video.objects.select_for_update().get(pk=video.pk)
                if locked.status == Video.Status.FAILED:
                    locked.mark_missing(missing)
    broken = list(Video.objects.filter(status=Video.Status.MISSING).order_by("pk"))
    job = None
    by_setting: dict[tuple, list[ImportEntry]] = {}
    for video in broken:
        entry = ImportEntry(video.yt8m_id, video.yt8m_id, video.source, list(video.labels), video.title)
        by_setting.setdefault((video.sample_every, video.sample_count, video.domain), []).append(entry)
    for (every, count, domain), entries in by_setting.items():
        if every is None and count is None:
            every = settings.DEFAULT_SAMPLE_EVERY_SECONDS
        job = videos_import(
            entries=entries,
            every=every,
            count=count,
            domain=domain,
            created_by=created_by,
            sync=sync,
            title=f"Repair {len(entries)} video(s) with missing frame files",
        )
    return broken, job


def frames_remove_orphans(*, older_than: float) -> list[str]:
    """Remove files under frames/ that no image references and that are older than `older_than` seconds (the files
    of a killed sampling run; a running one's are younger than the grace period). Returns the names removed.

    One folder per video (frames/<yt8m_id>/): its references are read through that video's frames, so memory
    stays bounded by the largest video, not the whole library."""
    cutoff = timezone.now() - timedelta(seconds=older_than)
    removed = []
    try:
        folders = default_storage.listdir("frames")[0]
    except FileNotFoundError:
        return removed
    busy = videos_being_sampled()
    for yt8m_id in folders:
        if yt8m_id in busy:
            continue  # a live unit is writing this video's new frames: not orphans, not yet referenced
        images = Image.objects.filter(frame__video__yt8m_id=yt8m_id).values_list("file", "thumbnail")
        referenced = {name for pair in images for name in pair if name}
        for name in _storage_walk(f"frames/{yt8m_id}"):
            if name in referenced:
                continue
            try:
                modified = default_storage.get_modified_time(name)
            except (NotImplementedError, FileNotFoundError):
                continue
            if modified > cutoff:
                continue
            _delete_files([name])
            removed.append(name)
    return removed


def videos_being_sampled() -> set[str]:
    """The videos (yt8m ids) a claimed sampling unit with a fresh heartbeat is working on now."""
    fresh = timezone.now() - timedelta(seconds=settings.JOB_STALE_SECONDS)
    sampling = JobTask.objects.held(fresh).filter(name="annotator.tasks.sample_video")
    running = sampling.values_list("kwargs__video_id", flat=True)
    return set(Video.objects.filter(pk__in=[pk for pk in running if pk is not None]).values_list("yt8m_id", flat=True))


def _storage_walk(folder: str) -> Iterator[str]:
    try:
        folders, files = default_storage.listdir(folder)
    except FileNotFoundError:
        return
    for name in files:
        yield f"{folder}/{name}"
    for sub in folders:
        yield from _storage_walk(f"{folder}/{sub}")


@contextlib.contextmanager
def local_video_file(source: str, run=None) -> Iterator[Path]:
    """A local path for the source: the file itself (checked against IMPORT_ROOTS again, since the worker
    may see another file system than the web process) or a temporary download of an s3:// object, during which the
    unit (`run`, a JobRun) beats while bytes move."""
    if not source.startswith("s3://"):
        path = resolve_import_path(source)
        if not path.is_file():
            raise ImportPathError("is not a file")
        _check_size(path.stat().st_size)
        yield path
        return
    from botocore.exceptions import ClientError

    from subtlebench.storage import s3_client, split_s3_uri

    bucket, key = split_s3_uri(source)
    client = s3_client()
    try:
        size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]
    except ClientError as error:
        if outage_of(error) is not None:
            raise  # the storage is away (a 5xx, throttling): the unit pauses, the file is not at fault
        code = error.response.get("Error", {}).get("Code", "")
        if code in ("404", "NoSuchKey", "NotFound", "NoSuchBucket"):
            raise ImportPathError("does not exist in the bucket") from error
        raise ImportPathError(f"cannot be read from S3 ({code or error})") from error
    _check_size(size)
    # A download under SCRATCH_ROOT, in the clean-up's ledger: a killed worker's copy does not stay behind.
    with scratch_file("video", suffix=Path(key).suffix or ".mp4") as path:
        with open(path, "wb") as handle:
            client.download_fileobj(bucket, key, handle, Callback=TransferBeats(run))
        yield path


def _check_size(size: int) -> None:
    if size > settings.MAX_UPLOAD_BYTES:
        limit = settings.MAX_UPLOAD_BYTES
        raise ImportPathError(f"is {size} bytes, over the limit of {limit} bytes (MAX_UPLOAD_BYTES)")


# --- Uploads ------------------------------------------------------------------------------------------------


def videos_upload(
    *,
    files,
    every: float | None = None,
    count: int | None = None,
    domain: str = Domain.NATURAL,
    created_by=None,
    idempotency_key: str = "",
) -> Job:
    """Store uploaded files where every worker reads them and import them as one job: with media in S3 in the bucket
    (under S3_PREFIX/uploads/), since a worker's disk is not the web's; else in a new folder under the first import
    root. A file over MAX_UPLOAD_BYTES is not stored: it fails (named) while the others go on. A resubmitted form (the
    same idempotency key) stores nothing and answers the job of the first submit."""
    every, count = sampling_parameters(every, count)
    existing = job_for_key(user=created_by, kind=Job.Kind.IMPORT, key=idempotency_key)
    if existing is not None:
        return existing
    batch = f"{timezone.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    if media_in_bucket():
        folder = f"s3://{default_storage.bucket}/{default_storage.key(f'uploads/{batch}')}"
    else:
        folder = Path(settings.IMPORT_ROOTS[0]) / "uploads" / batch
        folder.mkdir(parents=True)
    entries, seen = [], set()
    for upload in files:
        name = get_valid_filename(Path(upload.name).name) or "upload.mp4"
        stem = Path(name).stem[:YT8M_ID_MAX]
        entry = ImportEntry(label=name, yt8m_id=stem, source=name, title=name)
        if not upload.size:
            entry.error = f"{name}: the file is empty (0 bytes); it was not stored"
        elif upload.size > settings.MAX_UPLOAD_BYTES:
            entry.error = (
                f"{name}: the upload is {upload.size} bytes, over the limit of "
                f"{settings.MAX_UPLOAD_BYTES} bytes (MAX_UPLOAD_BYTES); it was not stored"
            )
        elif stem in seen:
            entry.error = f"{name}: another uploaded file has the same name stem {stem!r}"
            entry.yt8m_id = ""
        else:
            try:
                entry.source = _upload_store(upload, batch=batch, name=name, folder=folder)
            except UploadNotStored as error:
                entry.error = f"{name}: {error}"
        seen.add(stem)
        entries.append(entry)
    names = ", ".join(entry.label for entry in entries)
    return videos_import(
        entries=entries,
        source=str(folder),
        every=every,
        count=count,
        domain=domain,
        created_by=created_by,
        title=f"Upload {names}"[:300],
        idempotency_key=idempotency_key,
    )


class UploadNotStored(Exception):
    """One uploaded file could not be stored; the message says where and why."""


def _upload_store(upload, *, batch: str, name: str, folder) -> str:
    """Store one uploaded file and return the source its sampling unit reads: an s3:// URI in the media bucket, or
    the path in the upload folder."""
    if media_in_bucket():
        from botocore.exceptions import BotoCoreError, ClientError

        stored = f"uploads/{batch}/{name}"
        try:
            default_storage.save(stored, upload)
        except (ClientError, BotoCoreError) as error:
            raise UploadNotStored(f"storing the upload in {folder}/{name} failed ({error})") from error
        return f"s3://{default_storage.bucket}/{default_storage.key(stored)}"
    path = folder / name
    try:
        with path.open("wb") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
    except OSError as error:  # a full or read-only disk: this file fails, named, with the reason
        path.unlink(missing_ok=True)
        raise UploadNotStored(file_error_detail(error, what="storing the upload", where=folder)) from error
    return str(path.resolve())


# --- Re-sampling one video (the video page) -----------------------------------------------------------------


def video_resample_problems(
    *, video: Video, every: float | None, count: int | None, ignore_parameters: bool = False
) -> list[str]:
    """Why this video cannot be re-sampled now: pairs use its frames (new frames would orphan them), someone holds
    it, it is being sampled, its file is gone, or it is sampled this way already (unless `ignore_parameters`: the
    page asks before any are chosen). Empty: it can be, after a confirmation."""
    problems = []
    used = (
        Pair.objects.filter(Q(image_1__frame__video=video) | Q(image_2__frame__video=video))
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
    )
    if used:
        counts = ", ".join(f"{n} {status}" for status, n in sorted(used))
        problems.append(
            f"{sum(n for _, n in used)} pair(s) use its current frames ({counts}): new frames would leave them "
            "without images. Re-sampling is only for videos no pair uses yet."
        )
    released = released_frame_items(video)
    if released:
        problems.append(f"The {released}.")
    holder = video.holder_now()
    if holder is not None:
        problems.append(f"{holder.username} holds its lease now: their workbench would change under them.")
    if video.status == Video.Status.SAMPLING:
        problems.append("It is being sampled now: wait for that job.")
    if not video.source.startswith("s3://") and not Path(video.source).is_file():
        problems.append(f"Its source file {video.source} is gone: import the video again from a file.")
    if not ignore_parameters and video.is_sampled_as(source=video.source, every=every, count=count):
        problems.append("It is sampled with these parameters already: choose another interval or frame count.")
    return problems


def video_resample(
    *, video: Video, every: float | None, count: int | None, confirmed: bool, created_by, idempotency_key: str = ""
) -> Job:
    """Sample the video again from its source file with new parameters: an import Job of one unit. Its frames are
    replaced (the old files go once the new frames are committed), so this needs `confirmed` and is refused while
    any pair uses its frames or someone holds it; the sampling task checks the pairs again when it swaps frames."""
    every, count = sampling_parameters(every, count)
    problems = video_resample_problems(video=video, every=every, count=count)
    if problems:
        raise Conflict(f"Video {video.yt8m_id} cannot be re-sampled: " + " ".join(problems))
    if not confirmed:
        raise Invalid({"confirm": ["Confirm that the video's current frames (and any drafts on them) are replaced."]})
    entry = ImportEntry(
        label=video.yt8m_id, yt8m_id=video.yt8m_id, source=video.source, labels=list(video.labels), title=video.title
    )
    job = videos_import(
        entries=[entry],
        source=video.source,
        every=every,
        count=count,
        domain=video.domain,
        created_by=created_by,
        title=f"Re-sample {video.yt8m_id}",
        idempotency_key=idempotency_key,
    )
    return job
