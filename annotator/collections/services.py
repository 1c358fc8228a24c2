"""Import an image collection (a folder, a CSV/JSONL manifest or an S3 prefix) as one Job.

The layout's plan (annotator/collections/layouts.py) names the images and the pairs; each image is decoded once
(`inspect_image`: limits, format, thumbnail). A bad file or row is one problem, reported by file and line on the
job, and the rest imports. The good part is written in one transaction: a failure while writing leaves no rows and
removes the files it stored. Pairs given with a question go to review as submitted pairs (the editor's question
rules, as import_pairs); pairs without one become candidates for the authoring queue, with their regions made from
the masks (MVTec-AD ground truth, change-detection labels). The images are then embedded by the similarity worker.
Safe to re-run: an image the collection has already (same name, same bytes) is reused, a candidate or pair it has
already is left as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from annotator.collections.layouts import Plan, PlannedPair, detect_layout, read_plan
from annotator.export.format import ImageCheck, ScratchSpaceError, allowed_roots, inspect_image
from annotator.images import IMAGE_FORMATS, ImageLimitError, open_within_limits
from annotator.jobs.outages import outage_of
from annotator.jobs.scratch import scratch_folder
from annotator.jobs.services import (
    JobRun,
    JobTaskLost,
    TransferBeats,
    UnitRef,
    job_create_once,
    job_task_add,
    job_task_claim,
    job_unit,
    job_write_lock,
)
from annotator.models import Collection, Domain, Image, Job, JobCancelled, Pair, PairCandidate, SourceLicense
from annotator.models.jobs import ACTIVE
from annotator.picking.questions import question_validate
from annotator.similarity.services import images_queue_embeddings
from annotator.videos.services import ImportPathError, resolve_import_path
from benchmark.regions import MAX_REGIONS, RegionError, boxes_from_mask, validate_regions
from subtlebench.errors import Invalid, file_error_detail, is_file_error
from subtlebench.storage import s3_client, split_s3_uri

log = logging.getLogger(__name__)

IMPORT_TASK = "annotator.tasks.import_collection"
# An S3 prefix is copied to a scratch folder first; more objects than this is refused (a wrong prefix).
S3_MAX_OBJECTS = 100_000


class CollectionSourceError(Invalid):
    """The source as a whole is unusable: outside IMPORT_ROOTS, missing, an unknown layout or domain."""


def collection_check(*, source: str, name: str, domain: str, layout: str) -> None:
    """Refuse at once what would fail the whole import (the page and the API answer 400 before any job)."""
    problems = {}
    if domain not in Domain.values:
        problems["domain"] = [f"unknown domain {domain!r}: one of {', '.join(Domain.values)}."]
    if layout not in ("auto", *Collection.Layout.values):
        problems["layout"] = [f"unknown layout {layout!r}: auto or one of {', '.join(Collection.Layout.values)}."]
    field = Collection._meta.get_field("name")
    try:
        field.run_validators(name)
        if not name:
            raise Invalid("empty")
    except Exception:
        problems["name"] = ["a source name of letters, digits, - and _ (it is the export's source)."]
    existing = Collection.objects.filter(name=name).first()
    if existing is not None and existing.domain != domain:
        problems["domain"] = [f"collection {name} exists with the domain {existing.domain}: import into it with that."]
    if not source.startswith("s3://"):
        try:
            resolve_import_path(source)
        except ImportPathError as error:
            problems["source"] = [f"{source} {error}"]
    else:
        try:
            split_s3_uri(source)
        except ValueError as error:
            problems["source"] = [str(error)]
    if problems:
        raise CollectionSourceError(problems)


def collection_import(
    *,
    source: str,
    name: str,
    domain: str,
    layout: str = "auto",
    created_by=None,
    sync: bool = False,
    idempotency_key: str = "",
) -> Job:
    """Start the import Job of a collection: one unit, run by a Celery task after the commit, or here when `sync`.
    The same `idempotency_key` from the same user answers the job it made the first time."""
    collection_check(source=source, name=name, domain=domain, layout=layout)

    @transaction.atomic
    def create() -> Job:
        job = Job.objects.create(
            kind=Job.Kind.IMPORT,
            title=f"Import collection {name} ({domain}) from {source}",
            created_by=created_by,
            idempotency_key=idempotency_key,
            result={"collection": name, "source": source, "domain": domain, "layout": layout},
        )
        kwargs = {"job_id": job.pk, "source": source, "name": name, "domain": domain, "layout": layout}
        job_task_add(job=job, name=IMPORT_TASK, kwargs=kwargs, send=not sync)
        return job

    job, created = job_create_once(create, user=created_by, kind=Job.Kind.IMPORT, key=idempotency_key)
    if created and sync:
        unit = job.tasks.get()
        collection_import_run(**unit.kwargs, unit=UnitRef(unit.pk, worker="this process"))
    job.refresh_from_db()
    return job


def collection_import_run(
    *, job_id: int, source: str, name: str, domain: str, layout: str, unit: UnitRef | None = None
) -> Job:
    """What the task runs: claim the unit (a second delivery does nothing), import, finish the job with the counts
    and one error per problem. A crash fails the job with the reason: nothing is left running."""
    unit = job_unit(job_id, unit)
    run = job_task_claim(unit=unit) if unit.unit_id is not None else None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    if (run is None and unit.unit_id is not None) or not job.is_active:
        return job
    job.count_afresh()  # a re-run reads every image again
    progress = run or job
    try:
        collection_import_unit(source, name, domain, layout, job=job, progress=progress)
    except JobCancelled:
        # Cancelled, or the job ended meanwhile: another run of its unit imported it (a second copy stops here).
        if run is not None:
            run.cancel()
        job.refresh_from_db()
        return job
    except CollectionSourceError as error:
        job.finish(result=job.result, error=error.detail)
        if run is not None:
            run.complete()
    except (OperationalError, InterfaceError):
        raise  # the database is away: the task retries the whole import (nothing of it was committed)
    except Exception as error:
        if outage_of(error) is not None:
            raise  # the storage is away: the task pauses the unit and runs it again later (job_task_failed)
        job.finish(result=job.result, error=f"unexpected error: {error!r}")
        if run is not None:
            run.complete()
        raise
    job.refresh_from_db()
    return job


def _import_finish(job: Job, progress, result: dict, problems: list[str]) -> None:
    """Count the import's outcome on its job, in the transaction that writes its rows: the rows and the job's end
    commit together, so a second run of the unit finds the job ended and imports nothing again."""
    if isinstance(progress, JobRun) and not progress.complete():
        raise JobTaskLost(f"unit {progress.task_id} of job {job.pk} was taken over: its outcome is not counted")
    for problem in problems:
        job.advance(0, error=problem)
    imported = result["images_new"] + result["candidates"] + result["pairs"]
    failed = None if imported or not problems else f"nothing imported: {len(problems)} problem(s)"
    job.finish(result={**job.result, **result}, error=failed)


def collection_import_unit(source, name, domain, layout, *, job, progress) -> None:
    """The work of the import's unit (`progress`: its claimed JobRun, or the job): copy an s3:// source here, inspect
    each image, write the good part and count the outcome on the job in one transaction. JobCancelled when the job
    ended before the write: cancelled, or imported by another run of its unit."""
    owner = progress if isinstance(progress, JobRun) else job.pk
    if not Job.objects.filter(pk=job.pk, status__in=ACTIVE).exists():
        raise JobCancelled(f"job {job.pk} ended before its import ran")
    with scratch_folder("collection", owner=owner) as scratch:
        if source.startswith("s3://"):
            root = _download_prefix(source, scratch / "source", progress)
        else:
            try:
                root = resolve_import_path(source)
            except ImportPathError as error:
                raise CollectionSourceError(f"{source} {error}") from error
        chosen = detect_layout(root) if layout == "auto" else layout
        file_layouts = (Collection.Layout.PAIR_LIST, Collection.Layout.MANIFEST)
        if chosen != Collection.Layout.IMAGES and root.is_file() != (chosen in file_layouts):
            what = "a manifest file" if root.is_file() else "a folder"
            raise CollectionSourceError(f"{source} is {what}: the layout {chosen} does not fit it")
        plan = read_plan(root, chosen)
        thumbnails = scratch / "thumbnails"
        thumbnails.mkdir()
        try:
            checks = _inspect(root, plan, thumbnails, progress)
        except ScratchSpaceError as error:
            raise CollectionSourceError(file_error_detail(error.error, what=f"Import of {source}")) from error

        def outcome(counts: dict) -> None:
            _import_finish(job, progress, {**counts, "layout": chosen}, plan.problems)

        with _beating(progress):
            _write(root, plan, checks, name=name, domain=domain, layout=chosen, source=source, job=job, then=outcome)


@contextlib.contextmanager
def _beating(progress):
    """Beat the unit's heartbeat from a thread of its own while the one write transaction runs: the thread's own
    database connection makes each beat visible at once, so the sweeper never takes a long write for a worker that
    vanished (JOB_STALE_SECONDS) and runs the import a second time beside it."""
    if not isinstance(progress, JobRun):
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.JOB_HEARTBEAT_SECONDS):
                progress.beat(force=True)
        except (JobCancelled, DatabaseError):
            pass  # the unit was taken over or cancelled, or the database is away: the main thread finds out
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name="collection-import-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _download_prefix(uri: str, folder: Path, progress=None) -> Path:
    """Copy every object under an s3:// prefix into the folder, keeping the key's path below the prefix. The unit
    beats while bytes move (a large or slow download is not a dead worker); an S3 that does not answer is an outage
    (the unit pauses), not a source that cannot be read."""
    bucket, prefix = split_s3_uri(uri)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    client = s3_client()
    beats = TransferBeats(progress)
    count = 0
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                relative = item["Key"][len(prefix) :]
                parts = Path(relative).parts
                if not relative or relative.endswith("/") or ".." in parts or Path(relative).is_absolute():
                    continue
                count += 1
                if count > S3_MAX_OBJECTS:
                    raise CollectionSourceError(f"{uri}: more than {S3_MAX_OBJECTS} objects under the prefix")
                target = folder / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(bucket, item["Key"], str(target), Callback=beats)
                beats.file_done()
    except (CollectionSourceError, JobCancelled):
        raise
    except Exception as error:  # botocore raises many kinds: no bucket, no access, no server
        if outage_of(error) is not None:
            raise
        if is_file_error(error):  # this host's scratch disk (full, read-only), where S3 itself answered
            raise CollectionSourceError(file_error_detail(error, what=f"Import of {uri}", where=folder)) from error
        raise CollectionSourceError(f"{uri}: cannot be read from S3 ({type(error).__name__}: {error})") from error
    if not count:
        raise CollectionSourceError(f"{uri}: no objects under this prefix")
    return folder


def _inspect(root: Path, plan: Plan, thumbnails: Path, progress) -> dict[str, ImageCheck]:
    """Decode each planned image once; a bad one is a problem, and the pairs on it are left out."""
    progress.start(len(plan.images))
    roots = allowed_roots(root if root.is_dir() else root.parent)
    checks: dict[str, ImageCheck] = {}
    for name, planned in plan.images.items():
        check = inspect_image(planned.path, roots, thumbnail_dir=thumbnails)
        if check.problem:
            plan.problems.append(f"{name}: {check.problem}")
        else:
            checks[name] = check
        progress.advance(1)
    return checks


def _regions(pair: PlannedPair, checks: dict[str, ImageCheck], root: Path, plan: Plan) -> list[dict] | None:
    """The pair's regions: given (a pair list's JSONL) or from its masks, checked against the images' sizes.
    None (with a problem) when a mask or a region is wrong: the pair is left out rather than imported unmarked."""
    sizes = {1: (checks[pair.image_1].width, checks[pair.image_1].height)}
    sizes[2] = (checks[pair.image_2].width, checks[pair.image_2].height)
    regions = list(pair.regions)
    for number, mask in sorted(pair.masks.items()):
        shown = mask.relative_to(root).as_posix() if mask.is_relative_to(root) else mask.name
        try:
            with open_within_limits(mask) as picture:
                if picture.size != sizes[number]:
                    plan.problems.append(
                        f"{shown}: the mask is {picture.size[0]}×{picture.size[1]}, its image "
                        f"{sizes[number][0]}×{sizes[number][1]}: its pair is left out"
                    )
                    return None
                regions += boxes_from_mask(picture.convert("L"), image=number)
        except ImageLimitError as error:
            plan.problems.append(f"{shown}: the mask {error}: its pair is left out")
            return None
        except Exception as error:  # a decoder fed a broken file raises anything
            plan.problems.append(f"{shown}: the mask is not a readable image ({error}): its pair is left out")
            return None
    try:
        return validate_regions(regions[:MAX_REGIONS], sizes)
    except RegionError as error:
        plan.problems.append(f"{pair.where}, field regions: {error}")
        return None


def _question(pair: PlannedPair, plan: Plan) -> tuple[str, str, list] | None:
    try:
        return question_validate(
            category=pair.category, question=pair.question, answer=pair.answer, distractors=pair.distractors
        )
    except Invalid as error:
        for field, messages in error.errors.items():
            for message in messages:
                plan.problems.append(f"{pair.where}, field {field}: {message}")
        return None


def _stored(root: Path, planned, check: ImageCheck, collection: Collection, saved: list[str]) -> tuple[Image, bool]:
    """The image's row in the collection (reused when it has this name with these bytes already) and its files."""
    existing = Image.objects.filter(collection=collection, original_name=planned.name, sha256=check.sha256).first()
    if existing is not None:
        return existing, False
    data = planned.path.read_bytes()  # within IMPORT_MAX_IMAGE_BYTES: checked when it was inspected
    digest = hashlib.sha256(data).hexdigest()
    if digest != check.sha256:
        raise CollectionSourceError(f"{planned.name}: the file changed while it was imported; nothing was")
    name = f"imports/{digest[:2]}/{digest}{IMAGE_FORMATS[check.format]}"
    thumb_name = f"imports/{digest[:2]}/{digest}_thumb.jpg"
    for target, content in ((name, data), (thumb_name, check.thumbnail.read_bytes())):
        if not default_storage.exists(target):
            default_storage.save(target, ContentFile(content))
            saved.append(target)
    image = Image(
        width=check.width,
        height=check.height,
        source=collection.name,
        original_name=planned.name,
        sha256=digest,
        collection=collection,
        label=planned.label[:100],
    )
    image.file.name, image.thumbnail.name = name, thumb_name
    image.save()
    return image, True


def _write(root, plan: Plan, checks, *, name, domain, layout, source, job, then) -> None:
    """Write the good part of the plan in one transaction, which `then(counts)` ends (it counts the outcome on the
    job); on any failure remove the files it stored. Runs of one job's unit write one at a time: a run that finds
    its job ended writes nothing (JobCancelled)."""
    saved: list[str] = []
    counts = {"images": 0, "images_new": 0, "candidates": 0, "pairs": 0, "already": 0, "left_out": 0}
    now = timezone.now()
    if not checks:
        with transaction.atomic():  # no image could be read: no collection is made either
            job_write_lock(job.pk)
            then(counts)
        return
    try:
        with transaction.atomic():
            job_write_lock(job.pk)
            if not Job.objects.filter(pk=job.pk, status__in=ACTIVE).exists():
                raise JobCancelled(f"job {job.pk} ended: another run of its unit imported it, or it was cancelled")
            collection, _ = Collection.objects.get_or_create(
                name=name,
                defaults={"domain": domain, "layout": layout, "location": source, "created_by": job.created_by},
            )
            images: dict[str, Image] = {}
            new: list[Image] = []
            for image_name, planned in plan.images.items():
                if image_name in checks:
                    images[image_name], created = _stored(root, planned, checks[image_name], collection, saved)
                    if created:
                        new.append(images[image_name])
            for pair in plan.pairs:
                if pair.image_1 not in images or pair.image_2 not in images:
                    counts["left_out"] += 1  # an image of it was refused: that problem is reported already
                    continue
                regions = _regions(pair, checks, root, plan)
                if regions is None:
                    counts["left_out"] += 1
                    continue
                image_1, image_2 = images[pair.image_1], images[pair.image_2]
                fields = {
                    "domain": collection.domain,
                    "source": collection.name,
                    "source_id": pair.source_id[:200],
                    "group_key": collection.group_key(pair.group_key or pair.source_id),
                    "regions": regions,
                }
                if pair.question:
                    question = _question(pair, plan)
                    if question is None:
                        counts["left_out"] += 1
                        continue
                    if Pair.objects.filter(
                        category=pair.category, source=collection.name, source_id=fields["source_id"]
                    ).exists():
                        counts["already"] += 1
                        continue
                    Pair.objects.create(
                        image_1=image_1,
                        image_2=image_2,
                        category=pair.category,
                        question=question[0],
                        answer=question[1],
                        distractors=question[2],
                        status=Pair.Status.SUBMITTED,
                        author=job.created_by,
                        submitted_at=now,
                        **fields,
                    )
                    counts["pairs"] += 1
                    continue
                _, created = PairCandidate.objects.get_or_create(
                    image_1=image_1,
                    image_2=image_2,
                    defaults={
                        **fields,
                        "origin": PairCandidate.Origin.GIVEN,
                        "collection": collection,
                        "category": pair.category if pair.category in _categories() else "",
                        "job": job,
                    },
                )
                counts["candidates" if created else "already"] += 1
            counts["images"] = len(images)
            counts["images_new"] = len(new)
            if new:
                # Standalone images are embedded like frames, by the similarity worker (a unit of its own job).
                images_queue_embeddings(images=new, user=job.created_by)
            then(counts)
    except BaseException as error:
        for stored in saved:
            try:
                default_storage.delete(stored)
            except Exception as left:  # a storage that is away: the clean-up finds the file no row references
                log.warning("import of %s: %s not removed after a failed write (%s)", source, stored, left)
        if isinstance(error, OSError) and outage_of(error) is None:
            where = getattr(default_storage, "location", None)
            raise CollectionSourceError(file_error_detail(error, what=f"Import of {source}", where=where)) from error
        raise


def _categories() -> set[str]:
    from annotator.models import Category

    return set(Category.values)


# --- The terms of each source: what the dataset card says of its license and citation -------------------------


def source_terms_table() -> list[dict]:
    """Every source a pair or a collection is exported under, with the terms the card gives it: its recorded row, or
    its defaults (`recorded` False); a collection's source says which collection."""
    sources = set(Collection.objects.values_list("name", flat=True))
    sources |= set(Pair.objects.order_by().values_list("source", flat=True).distinct())
    rows = {row.source: row for row in SourceLicense.objects.filter(source__in=sources)}
    terms = SourceLicense.objects.terms_of(sources)
    collections = dict(Collection.objects.values_list("name", "layout"))
    return [
        {
            "source": source,
            "terms": terms[source],
            "recorded": rows.get(source),
            "layout": collections.get(source),
        }
        for source in sorted(sources)
    ]


@transaction.atomic
def source_license_save(*, source: str, license: str, citation: str = "", note: str = "", user) -> SourceLicense:
    """Record the terms of a source (its license, citation and note), replacing its defaults or earlier terms; the
    next export's card carries them. A field that breaks a rule is refused (Invalid, by field)."""
    row = SourceLicense.objects.select_for_update().filter(source=source).first() or SourceLicense(source=source)
    row.license, row.citation, row.note = license.strip(), citation.strip(), note.strip()
    row.updated_by, row.updated = user, timezone.now()
    try:
        row.full_clean(validate_unique=False)
    except ValidationError as error:
        raise Invalid(error.message_dict) from error
    row.save()
    return row
