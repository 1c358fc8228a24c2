"""Edit jobs: a coordinator has a model edit images of a collection, one instruction per image written from the
template of one kind of change (annotator.models.editing); each edited image becomes a candidate pair (the original
and the edit) with the template's draft question and boxes around the pixels that changed. A person accepts the edit
(then the candidate enters the authoring queue) or refuses it with the reason (kept, out of the queue).

One unit per job goes through the job's images in order; each image's outcome is written as it is reached, so a
requeued unit goes on with the images still pending. The endpoint's refusal, no answer in time, a wrong size or a
non-image fails that one image with the reason, never the job; the storage or the database away pauses the unit
(annotator.jobs.outages), which resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import io
import logging
import string
from pathlib import PurePath

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone
from PIL import Image as PILImage

from annotator.images import IMAGE_FORMATS, open_within_limits
from annotator.jobs.outages import outage_of
from annotator.jobs.services import job_create_once, job_task_add, job_task_claim, job_unit
from annotator.llm.client import RequestFailed
from annotator.llm.edits import ImageEditClient
from annotator.llm.endpoints import EndpointUnusable, endpoint_api_key, endpoint_client
from annotator.models import (
    Collection,
    EditKind,
    EditTemplate,
    Image,
    ImageEdit,
    Job,
    JobCancelled,
    ModelEndpoint,
    PairCandidate,
)
from annotator.models.editing import OBJECT_MAX
from annotator.regions import regions_from_difference
from benchmark.protocol import image_part
from subtlebench.errors import Conflict, Forbidden, Invalid
from subtlebench.roles import COORDINATOR, REVIEWER, has_role

log = logging.getLogger(__name__)

EDIT_TASK = "annotator.tasks.edit_images"
JOB_MAX_IMAGES = 500
PLACEHOLDERS = {"object", "value"}
NAMER_PROMPT = (
    "Name the one most prominent object in this image whose {kind} an image editor could change, in one to three "
    "words, lowercase, with nothing else."
)


# --- Templates ------------------------------------------------------------------------------------------------

# The templates of the kinds of change until a coordinator edits them: (instruction, question, answer).
DEFAULT_TEMPLATES = {
    "colour": (
        "Change the colour of the {object} to {value}. Keep everything else in the image exactly as it is.",
        "What changed about the {object}?",
        "Its colour changed to {value}.",
    ),
    "state": (
        "Make the {object} {value}. Keep everything else in the image exactly as it is.",
        "In which image is the {object} {value}?",
        "Second image.",
    ),
    "added": (
        "Add a {object} to the scene where it fits naturally. Keep everything else in the image exactly as it is.",
        "What was added in the second image?",
        "A {object}.",
    ),
    "removed": (
        "Remove the {object} from the image and fill its place with the background. Keep everything else exactly "
        "as it is.",
        "What was removed in the second image?",
        "The {object}.",
    ),
    "count": (
        "Add one more {object} next to the existing one(s). Keep everything else in the image exactly as it is.",
        "In which image are there more {object}s?",
        "Second image.",
    ),
    "position": (
        "Move the {object} slightly to the {value}. Keep everything else in the image exactly as it is.",
        "How did the {object} move?",
        "To the {value}.",
    ),
}


def edit_templates() -> list[EditTemplate]:
    """Every kind's template, the default one made for a kind that has none yet."""
    templates = {template.kind: template for template in EditTemplate.objects.all()}
    for kind in EditKind.values:
        if kind not in templates:
            instruction, question, answer = DEFAULT_TEMPLATES[kind]
            templates[kind], _ = EditTemplate.objects.get_or_create(
                kind=kind, defaults={"instruction": instruction, "question": question, "answer": answer}
            )
    return [templates[kind] for kind in EditKind.values]


def edit_template(kind: str) -> EditTemplate | None:
    """The kind's template (its default until edited); None for a kind that is not one."""
    if kind not in EditKind.values:
        return None
    return next(template for template in edit_templates() if template.kind == kind)


def template_fields_check(**texts: str) -> dict:
    """The texts of a template, trimmed; Invalid names a text with an unknown placeholder or a stray brace."""
    errors, clean = {}, {}
    for name, text in texts.items():
        text = " ".join(str(text or "").split())
        try:
            names = {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
        except ValueError as error:
            errors[name] = [f"A brace is not closed or not opened ({error})."]
            continue
        unknown = names - PLACEHOLDERS
        if unknown:
            errors[name] = [f"Unknown placeholder {{{sorted(unknown)[0]}}}: use {{object}} and {{value}} only."]
        clean[name] = text
    if not errors and not clean.get("instruction"):
        errors["instruction"] = ["Write the instruction the editing model gets."]
    if errors:
        raise Invalid(errors)
    return clean


@transaction.atomic
def edit_template_update(*, user, template: EditTemplate, instruction: str, question: str, answer: str) -> EditTemplate:
    """Edit a kind's template; jobs started later use it (a job keeps the instructions it wrote)."""
    if not has_role(user, COORDINATOR):
        raise Forbidden("Only a coordinator can edit the templates of edit jobs.")
    clean = template_fields_check(instruction=instruction, question=question, answer=answer)
    for name, text in clean.items():
        if len(text) > EditTemplate._meta.get_field(name).max_length:
            raise Invalid({name: [f"At most {EditTemplate._meta.get_field(name).max_length} characters."]})
        setattr(template, name, text)
    template.updated_by, template.updated = user, timezone.now()
    template.save()
    return template


def fill(text: str, *, object_name: str, value: str) -> str:
    return text.replace("{object}", object_name).replace("{value}", value)


def uses(template: EditTemplate, placeholder: str) -> bool:
    return any(f"{{{placeholder}}}" in text for text in (template.instruction, template.question, template.answer))


# --- Starting a job -------------------------------------------------------------------------------------------


def edit_job_start(
    *,
    user,
    collection_id,
    kind: str,
    endpoint_id,
    image_ids,
    object_name: str = "",
    value: str = "",
    namer_id=None,
    key: str = "",
) -> Job:
    """Check the choices and queue an edit job over the images (of the collection); Invalid names each bad field.
    The object is `object_name` for every image, or, with a naming model (`namer_id`), named per image by it."""
    if not has_role(user, COORDINATOR):
        raise Forbidden("Only a coordinator can start an edit job.")
    errors: dict = {}
    collection = Collection.objects.filter(pk=_int(collection_id)).first()
    if collection is None:
        errors["collection"] = [f"No collection with the id {str(collection_id)[:20]!r}."]
    template = edit_template(kind)
    if template is None:
        errors["kind"] = [f"{str(kind)[:30]!r} is not a kind of edit: one of {', '.join(EditKind.values)}."]
    endpoint = ModelEndpoint.objects.filter(pk=_int(endpoint_id)).first()
    if endpoint is None:
        errors["endpoint"] = ["Choose the image-editing model (a registered endpoint)."]
    namer = None
    if namer_id not in (None, ""):
        namer = ModelEndpoint.objects.filter(pk=_int(namer_id)).first()
        if namer is None:
            errors["namer"] = [f"No model with the id {str(namer_id)[:20]!r}."]
    object_name = " ".join(str(object_name or "").split())[:OBJECT_MAX]
    value = " ".join(str(value or "").split())[:OBJECT_MAX]
    if template is not None:
        if uses(template, "object") and not object_name and namer is None:
            errors["object_name"] = ["Name the object, or choose a model that names it in each image."]
        if uses(template, "value") and not value:
            errors["value"] = [f"Say what the {template.get_kind_display()} becomes (the template's {{value}})."]
    ids = sorted({_int(i) for i in (image_ids or []) if _int(i) is not None})
    if not ids:
        errors["images"] = ["Choose at least one image."]
    elif len(ids) > JOB_MAX_IMAGES:
        errors["images"] = [f"At most {JOB_MAX_IMAGES} images per job ({len(ids)} chosen)."]
    elif collection is not None:
        found = set(Image.objects.filter(collection=collection, pk__in=ids).values_list("pk", flat=True))
        missing = [i for i in ids if i not in found]
        if missing:
            errors["images"] = [f"Not images of collection {collection.name}: {', '.join(map(str, missing[:10]))}."]
    if errors:
        raise Invalid(errors)
    options = {
        "collection": collection.pk,
        "kind": kind,
        "endpoint": endpoint.pk,
        "namer": namer.pk if namer else None,
        "object_name": object_name,
        "value": value,
    }

    plural = f"{len(ids)} image" + ("" if len(ids) == 1 else "s")

    def create() -> Job:
        with transaction.atomic():
            job = Job.objects.create(
                kind=Job.Kind.EDIT,
                title=f"Edit {plural} of {collection.name}: {template.get_kind_display()}, {endpoint.name}",
                created_by=user,
                idempotency_key=key,
                total=len(ids),
                result={"options": options},
            )
            named = object_name if namer is None else ""
            ImageEdit.objects.bulk_create(
                ImageEdit(
                    job=job,
                    image_id=image_id,
                    kind=kind,
                    object_name=named,
                    value=value,
                    instruction=fill(template.instruction, object_name=named, value=value) if named else "",
                    question=fill(template.question, object_name=named, value=value) if named else template.question,
                    answer=fill(template.answer, object_name=named, value=value) if named else template.answer,
                )
                for image_id in ids
            )
            job_task_add(job=job, name=EDIT_TASK, kwargs={"job_id": job.pk})
        return job

    job, _ = job_create_once(create, user=user, kind=Job.Kind.EDIT, key=key)
    return job


def _int(value) -> int | None:
    text = str(value if value is not None else "").strip()
    return int(text) if text.isdigit() and len(text) <= 18 else None


# --- The worker's side ----------------------------------------------------------------------------------------


class EditFailed(Exception):
    """One image's edit failed for a reason of its own (the message): the job goes on with the next image."""


def edit_job_run(*, job_id: int, unit=None) -> Job | None:
    """What the task calls: claim the unit, edit each image still pending, finish the job with the counts."""
    unit = job_unit(job_id, unit)
    run = job_task_claim(unit=unit) if unit.unit_id is not None else None
    if run is None and unit.unit_id is not None:
        return None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    progress = run or job
    options = job.result["options"]
    edits = ImageEdit.objects.filter(job=job)
    if "retry_of" in job.result and not edits.exists():
        _retry_edits(job, original=job.result["retry_of"])
    try:
        progress.start(total=edits.count())
        Job.objects.filter(pk=job.pk).update(done=edits.exclude(status=ImageEdit.Status.PENDING).count())
        endpoint = ModelEndpoint.objects.filter(pk=options["endpoint"]).first()
        namer = ModelEndpoint.objects.filter(pk=options["namer"]).first() if options["namer"] else None
        if endpoint is None or (options["namer"] and namer is None):
            return _finish(job, run, error="the editing or the naming model was deleted after the job started")
        try:
            editor = _client(endpoint, ImageEditClient)
            naming = _client(namer) if namer else None
        except EndpointUnusable as unusable:
            return _finish(job, run, error=f"the model cannot be asked: {unusable}")
        try:
            pending = edits.filter(status=ImageEdit.Status.PENDING).select_related("image").order_by("pk")
            for edit in pending:
                reason = ""
                try:
                    _edit_one(edit, editor=editor, naming=naming, namer=namer, job=job)
                except EditFailed as failed:
                    reason = str(failed)
                except RequestFailed as failed:
                    reason = failed.message
                except (JobCancelled, OperationalError, InterfaceError):
                    raise
                except Exception as error:  # a broken original, a decoder's error: this image's problem
                    if outage_of(error) is not None:
                        raise
                    log.warning("edit %s of job %s failed", edit.pk, job.pk, exc_info=True)
                    reason = f"{type(error).__name__}: {error}"
                if reason:
                    ImageEdit.objects.filter(pk=edit.pk).update(status=ImageEdit.Status.FAILED, error=reason[:2000])
                progress.advance(1, error=f"{edit.image}: {reason}"[:1000] if reason else None)
        finally:
            editor.close()
            if naming is not None:
                naming.close()
    except JobCancelled:
        if run is not None:
            run.cancel()
        return job
    except (OperationalError, InterfaceError):
        raise  # the database away: the task retries and the run goes on
    except Exception as error:
        if outage_of(error) is not None:
            raise  # the storage away: the unit pauses with the reason and goes on when it is back
        log.exception("edit job %s stopped", job.pk)
        return _finish(job, run, error=f"the run stopped: {type(error).__name__}: {error}")
    return _finish(job, run)


def _retry_edits(job: Job, *, original: int) -> None:
    """A retried job's edits: the original job's images that failed or were never reached, asked again."""
    again = ImageEdit.objects.filter(job_id=original, status__in=(ImageEdit.Status.FAILED, ImageEdit.Status.PENDING))
    with transaction.atomic():
        ImageEdit.objects.bulk_create(
            (
                ImageEdit(
                    job=job,
                    image_id=edit.image_id,
                    kind=edit.kind,
                    object_name=edit.object_name,
                    value=edit.value,
                    instruction=edit.instruction,
                    question=edit.question,
                    answer=edit.answer,
                )
                for edit in again.order_by("pk")
            ),
            ignore_conflicts=True,
        )


def _client(endpoint: ModelEndpoint, client_class=None):
    key = endpoint_api_key(endpoint)
    if client_class is None:
        return endpoint_client(endpoint, key)
    return endpoint_client(endpoint, key, client_class=client_class)


def _finish(job: Job, run, error: str | None = None) -> Job:
    counts = {status: 0 for status in ImageEdit.Status.values}
    for status in ImageEdit.objects.filter(job=job).values_list("status", flat=True):
        counts[status] += 1
    result = {**job.result, "counts": counts, "candidates": PairCandidate.objects.filter(job=job).count()}
    with transaction.atomic():
        if run is None or run.complete(status="failed" if error else "done"):
            job.finish(result=result, error=error)
    return job


def _edit_one(edit: ImageEdit, *, editor: ImageEditClient, naming, namer, job: Job) -> None:
    """Name the object (with a naming model), ask for the edit, store the edited image and its candidate."""
    image = edit.image
    with default_storage.open(image.file.name, "rb") as handle:
        original = handle.read()
    if naming is not None:
        edit.object_name = _name_object(naming, namer, original, edit.get_kind_display())
        template = edit_template(edit.kind)
        texts = {
            name: fill(getattr(template, name), object_name=edit.object_name, value=edit.value)
            for name in ("instruction", "question", "answer")
        }
        for name, text in texts.items():
            setattr(edit, name, text)
        ImageEdit.objects.filter(pk=edit.pk).update(object_name=edit.object_name, **texts)
    edited = editor.edit(
        _as_png(original),
        file_name=PurePath(image.original_name or "image").stem + ".png",
        prompt=edit.instruction,
        size=(image.width, image.height),
        retries=settings.MODEL_EVAL_RETRIES,  # no connection, 429 and 5xx: with backoff, as a model run's requests
    )
    with open_within_limits(original) as first, open_within_limits(edited) as second:
        regions = regions_from_difference(first, second)
        kind = second.format
        thumbnail = _thumbnail(second)
    if not regions:
        raise EditFailed("the edited image shows no difference from the original")
    digest = hashlib.sha256(edited).hexdigest()
    name = f"edits/{digest[:2]}/{digest}{IMAGE_FORMATS[kind]}"
    thumb_name = f"edits/{digest[:2]}/{digest}_thumb.jpg"
    for target, content in ((name, edited), (thumb_name, thumbnail)):
        if not default_storage.exists(target):
            default_storage.save(target, ContentFile(content))
    collection = image.collection
    stem = PurePath(image.original_name or f"image-{image.pk}").stem
    with transaction.atomic():
        copy = Image(
            width=image.width,
            height=image.height,
            source=image.source,
            original_name=f"{stem}.edit-{edit.pk}{IMAGE_FORMATS[kind]}",
            sha256=digest,
            collection=collection,
            label=image.label,
        )
        copy.file.name, copy.thumbnail.name = name, thumb_name
        copy.save()
        candidate = PairCandidate.objects.create(
            image_1=image,
            image_2=copy,
            origin=PairCandidate.Origin.EDITED,
            collection=collection,
            domain=collection.domain if collection else "natural",
            source=collection.name if collection else image.source,
            source_id=f"edit-{edit.pk}",
            group_key=collection.group_key(image.label or stem) if collection else "",
            category=edit.category,
            regions=regions,
            job=job,
            status=PairCandidate.Status.EDIT_CHECK,
        )
        ImageEdit.objects.filter(pk=edit.pk).update(
            status=ImageEdit.Status.TO_CHECK, edited_image=copy, candidate=candidate, error=""
        )


def _as_png(data: bytes) -> bytes:
    """The original as PNG, the format every editing API takes."""
    with open_within_limits(data, name="the original") as picture:
        buffer = io.BytesIO()
        picture.convert("RGB").save(buffer, "PNG")
    return buffer.getvalue()


def _thumbnail(picture: PILImage.Image) -> bytes:
    small = picture.convert("RGB")
    small.thumbnail((settings.THUMBNAIL_MAX_SIDE, settings.THUMBNAIL_MAX_SIDE))
    buffer = io.BytesIO()
    small.save(buffer, "JPEG", quality=85)
    return buffer.getvalue()


def _name_object(client, namer: ModelEndpoint, image: bytes, kind: str) -> str:
    """The object the naming model sees in the image, in a few words; EditFailed when it names none."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": NAMER_PROMPT.format(kind=kind)}, image_part(image)]}
    ]
    reply = client.complete(messages, {"max_tokens": 16, "temperature": 0}, retries=0)
    lines = [line for line in reply.text.strip().splitlines() if line.strip()]
    name = lines[0].strip().strip(".\"'`*").strip().lower()[:OBJECT_MAX] if lines else ""
    if not name or len(name.split()) > 5:
        raise EditFailed(f"{namer.name} named no object (it answered {reply.text[:80]!r})")
    return name


# --- Checking the edit ----------------------------------------------------------------------------------------


def _check_checker(user) -> None:
    if not has_role(user, REVIEWER, COORDINATOR):
        raise Forbidden("Only a reviewer or a coordinator can accept or refuse a model's edit.")


@transaction.atomic
def edit_accept(*, user, edit: ImageEdit) -> ImageEdit:
    """The change is what was asked and the rest is intact: its candidate enters the authoring queue."""
    _check_checker(user)
    edit = _locked_to_check(edit)
    now = timezone.now()
    ImageEdit.objects.filter(pk=edit.pk).update(status=ImageEdit.Status.ACCEPTED, checked_by=user, checked=now)
    PairCandidate.objects.filter(pk=edit.candidate_id, status=PairCandidate.Status.EDIT_CHECK).update(
        status=PairCandidate.Status.OPEN, updated=now
    )
    edit.refresh_from_db()
    return edit


@transaction.atomic
def edit_refuse(*, user, edit: ImageEdit, reason: str, note: str = "") -> ImageEdit:
    """The edit is not usable (the reason, and a note): it is kept with both, its candidate dismissed."""
    _check_checker(user)
    if reason not in ImageEdit.RefuseReason.values:
        shown = ", ".join(ImageEdit.RefuseReason.values)
        raise Invalid({"reason": [f"Say why the edit is refused: one of {shown}."]})
    note = str(note or "").strip()[: ImageEdit._meta.get_field("refuse_note").max_length]
    if reason == ImageEdit.RefuseReason.OTHER and not note:
        raise Invalid({"note": ["Say in a note what is wrong with the edit."]})
    edit = _locked_to_check(edit)
    now = timezone.now()
    ImageEdit.objects.filter(pk=edit.pk).update(
        status=ImageEdit.Status.REFUSED, checked_by=user, checked=now, refuse_reason=reason, refuse_note=note
    )
    PairCandidate.objects.filter(pk=edit.candidate_id, status=PairCandidate.Status.EDIT_CHECK).update(
        status=PairCandidate.Status.DISMISSED, dismissed_by=user, updated=now
    )
    edit.refresh_from_db()
    return edit


def _locked_to_check(edit: ImageEdit) -> ImageEdit:
    locked = ImageEdit.objects.select_for_update().get(pk=edit.pk)
    if locked.status != ImageEdit.Status.TO_CHECK:
        raise Conflict(f"Edit {locked.pk} is {locked.get_status_display()}: only an edit to check can be decided.")
    return locked


def edit_next_to_check() -> ImageEdit | None:
    """The oldest edit waiting for a check."""
    return ImageEdit.objects.to_check().order_by("created", "pk").first()
