"""Synthetic sweeps: define one (a family, one or two factors with their levels, items per cell, a seed), generate it
as a job (one unit per cell, resumable without duplicates), publish it as an experiment release, and read the
accuracy per cell of every model run and study on its pairs, with intervals and fitted thresholds.

A sweep's pairs are ordinary pairs (domain synthetic, source synthetic), submitted for review or accepted directly,
and their images go through the same similarity check as every pair. An experiment sweep is kept out of the
benchmark's own exports; its own export (`ExportOptions.sweep`) is published as a release, so that model runs and
human studies, which stand on a release's items, stand on the sweep's items. Whatever release a pair reached, its
answers count in its cell: results are joined to the sweep by pair.
"""

from __future__ import annotations

import hashlib
import logging

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotator.jobs.services import OPEN, job_create_once, job_task_add, job_task_claim
from annotator.models import Image, Job, JobCancelled, Pair, Release, Sweep, SweepItem
from annotator.synthetic.generator import (
    BOUNDS,
    CHOICES,
    DEFAULTS,
    FAMILIES,
    VERSION,
    SyntheticError,
    clean_factors,
    synthetic_pair,
)
from subtlebench.errors import Conflict, Forbidden, Invalid
from subtlebench.roles import COORDINATOR, has_role
from subtlebench.text import NAME_MAX

log = logging.getLogger(__name__)

SWEEP_TASK = "annotator.tasks.sweep_cell"
MAX_LEVELS = 12
MAX_ITEMS = 20_000
MAX_PER_CELL = 500
CHUNK = 10  # pairs per transaction: their rows in three bulk inserts, one progress update


def _check_coordinator(user) -> None:
    """None is the command line (manage.py generate_sweep), run by whoever runs the server."""
    if user is not None and not has_role(user, COORDINATOR):
        raise Forbidden("Only a coordinator can define, run or publish a synthetic sweep.")


# --- Defining a sweep ---------------------------------------------------------------------------------------------


def _number(raw, where: str) -> float | int:
    if isinstance(raw, bool):
        raise Invalid({where: [f"{raw!r} is not a number."]})
    if isinstance(raw, int | float):
        return raw
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise Invalid({where: [f"{str(raw)[:40]!r} is not a number."]}) from None
    return int(value) if value.is_integer() else value


def clean_axes(family: str, axes) -> list[dict]:
    """One or two swept factors of the family, each with 1 to MAX_LEVELS distinct numeric levels (sorted)."""
    if not isinstance(axes, list) or not 1 <= len(axes) <= 2:
        raise Invalid({"axes": ["Sweep one or two factors."]})
    clean = []
    for number, axis in enumerate(axes, start=1):
        where = f"axis {number}"
        if not isinstance(axis, dict) or not isinstance(axis.get("factor"), str):
            raise Invalid({"axes": [f"{where}: give a factor and its levels."]})
        factor = axis["factor"]
        if factor not in DEFAULTS[family] or (family, factor) in CHOICES:
            swept = [name for name in DEFAULTS[family] if (family, name) not in CHOICES]
            raise Invalid(
                {"axes": [f"{where}: {factor!r} is not a numeric factor of {family}: use {', '.join(swept)}."]}
            )
        levels = axis.get("levels")
        if isinstance(levels, str):
            levels = [part for part in levels.replace(",", " ").split() if part]
        if not isinstance(levels, list) or not levels:
            raise Invalid({"axes": [f"{where} ({factor}): give at least one level."]})
        values = sorted({_number(level, "axes") for level in levels})
        if len(values) > MAX_LEVELS:
            raise Invalid({"axes": [f"{where} ({factor}): at most {MAX_LEVELS} levels, got {len(values)}."]})
        low, high, whole = BOUNDS[factor]
        for value in values:
            if whole and value != int(value):
                raise Invalid({"axes": [f"{where} ({factor}): levels must be whole numbers, got {value:g}."]})
            if not low <= value <= high:
                raise Invalid({"axes": [f"{where} ({factor}): levels go from {low:g} to {high:g}, got {value:g}."]})
        clean.append({"factor": factor, "levels": [int(v) if whole else float(v) for v in values]})
    if len(clean) == 2 and clean[0]["factor"] == clean[1]["factor"]:
        raise Invalid({"axes": ["Sweep two different factors."]})
    return clean


def sweep_create(
    *,
    user,
    family: str,
    axes,
    items_per_cell: int,
    seed: int = 0,
    factors: dict | None = None,
    size: int = 512,
    landing: str = Sweep.Landing.REVIEW,
    experiment: bool = True,
    title: str = "",
    key: str = "",
    send: bool = True,
) -> Sweep:
    """Check the definition (every cell is drawn once, so a factor combination that cannot be made is refused now,
    naming its cell) and queue its job: one unit per cell."""
    _check_coordinator(user)
    if family not in FAMILIES:
        raise Invalid({"family": [f"Unknown family {family!r}: use one of {', '.join(FAMILIES)}."]})
    axes = clean_axes(family, axes)
    fixed = {name: value for name, value in (factors or {}).items() if name not in {a["factor"] for a in axes}}
    if landing not in Sweep.Landing.values:
        raise Invalid({"landing": [f"Land the pairs in review or accepted, not {landing!r}."]})
    if (
        isinstance(items_per_cell, bool)
        or not isinstance(items_per_cell, int)
        or not 1 <= items_per_cell <= MAX_PER_CELL
    ):
        raise Invalid({"items_per_cell": [f"Items per cell must be from 1 to {MAX_PER_CELL}."]})
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise Invalid({"seed": ["The seed is a whole number from 0 to 2147483647."]})
    if not 64 <= size <= 2048:
        raise Invalid({"size": ["The image size is from 64 to 2048 pixels."]})
    title = " ".join(str(title or "").split())[:NAME_MAX] or f"{family}: " + " × ".join(a["factor"] for a in axes)
    sweep = Sweep(
        title=title,
        family=family,
        axes=axes,
        items_per_cell=items_per_cell,
        seed=seed,
        size=size,
        landing=landing,
        experiment=experiment,
        created_by=user,
    )
    sweep.factors = {k: v for k, v in DEFAULTS[family].items() if k not in sweep.factor_names}
    sweep.factors.update(fixed)
    for levels in sweep.cells():
        try:
            synthetic_pair(family, {**sweep.factors, **levels}, seed=seed, index=0, size=size)
        except SyntheticError as error:
            where = ", ".join(f"{name} {value:g}" for name, value in levels.items())
            raise Invalid({"factors": [f"cell {where}: {error}"]}) from error
    sweep.factors = clean_factors(family, sweep.factors)
    for name in sweep.factor_names:
        sweep.factors.pop(name)
    if sweep.total > MAX_ITEMS:
        raise Invalid({"items_per_cell": [f"{sweep.total} pairs in all; at most {MAX_ITEMS} in one sweep."]})

    def create() -> Job:
        with transaction.atomic():
            job = Job.objects.create(
                kind=Job.Kind.SWEEP,
                title=f"Synthetic sweep: {title}",
                created_by=user,
                total=sweep.total,
                idempotency_key=key,
                result={"cells": len(sweep.cells()), "items_per_cell": items_per_cell},
            )
            sweep.job = job
            sweep.save()
            job.result["sweep"] = sweep.pk
            job.save(update_fields=["result"])
            for cell in range(len(sweep.cells())):
                kwargs = {"job_id": job.pk, "sweep_id": sweep.pk, "cell": cell}
                job_task_add(job=job, name=SWEEP_TASK, kwargs=kwargs, send=send)
            return job

    job, _ = job_create_once(create, user=user, kind=Job.Kind.SWEEP, key=key)
    return job.sweeps.get()


# --- Generating it (the worker's side) ----------------------------------------------------------------------------


def stored_png(data: bytes, size: int) -> Image:
    """The image in storage under its content's hash (written once, shared by every pair that has it) and its row,
    not saved yet (`_make_items` writes a chunk's rows at once)."""
    digest = hashlib.sha256(data).hexdigest()
    name = f"synthetic/{digest[:2]}/{digest}.png"
    if not default_storage.exists(name):
        default_storage.save(name, ContentFile(data))
    image = Image(width=size, height=size, source="synthetic", original_name=name, sha256=digest)
    image.file.name = image.thumbnail.name = name
    return image


def _make_items(sweep: Sweep, cell: int, indices: list[int], levels: dict) -> list[SweepItem]:
    """Draw the cell's items `indices`, store their images, and write their rows (call it in a transaction). The
    files go first, named by their content: a transaction rolled back leaves files a later run reuses."""
    now = timezone.now()
    accepted = sweep.landing == Sweep.Landing.ACCEPTED
    images, pairs = [], []
    for index in indices:
        made = synthetic_pair(sweep.family, {**sweep.factors, **levels}, seed=sweep.seed, index=index, size=sweep.size)
        first, second = stored_png(made.image_1, made.size), stored_png(made.image_2, made.size)
        images += [first, second]
        source_id = f"sweep{sweep.pk}-c{cell}-i{index}"
        pairs.append(
            Pair(
                image_1=first,
                image_2=second,
                category=made.category,
                domain="synthetic",
                source="synthetic",
                source_id=source_id,
                group_key=f"synthetic:{source_id}",  # every pair its own scene: its own cluster
                generation_info={**made.generation_info, "sweep": sweep.pk, "cell": cell, "levels": levels},
                question=made.question,
                answer=made.answer,
                distractors=made.distractors,
                regions=made.regions,
                status=Pair.Status.ACCEPTED if accepted else Pair.Status.SUBMITTED,
                author=sweep.created_by,
                submitted_at=now,
                decided_at=now if accepted else None,
            )
        )
    Image.objects.bulk_create(images)
    for pair in pairs:  # the images have their ids now: set the foreign keys from them
        pair.image_1_id, pair.image_2_id = pair.image_1.pk, pair.image_2.pk
    Pair.objects.bulk_create(pairs)
    items = [
        SweepItem(sweep=sweep, cell=cell, index=index, levels=levels, pair=pair)
        for index, pair in zip(indices, pairs, strict=True)
    ]
    return SweepItem.objects.bulk_create(items)


def _missing(sweep: Sweep, cell: int) -> list[int]:
    done = set(SweepItem.objects.filter(sweep=sweep, cell=cell).values_list("index", flat=True))
    return [index for index in range(sweep.items_per_cell) if index not in done]


def _check_same_generator(sweep: Sweep) -> None:
    """A sweep's cells are compared with each other: its pairs must all come from one version of the generator. The
    pairs an older version made stay as they are (their generation_info names it); the rest of that sweep is not
    drawn by this one."""
    older = (
        Pair.objects.filter(sweep_item__sweep=sweep)
        .exclude(generation_info__version=VERSION)
        .values_list("generation_info__version", flat=True)
        .first()
    )
    if older is not None:
        raise SyntheticError(
            f"its pairs so far were drawn by version {older} of the generator and this is version {VERSION}, whose "
            "pairs differ; define a new sweep to draw them all with this version"
        )


def sweep_run_unit(*, job_id: int, sweep_id: int, cell: int, unit=None) -> Job | None:
    """Claim the cell's unit and make its pairs not made yet (CHUNK at a time, each chunk in one transaction with its
    progress), so a unit run again after its worker died (or by a retry job) goes on where it stopped; finish the job
    after its last unit."""
    run = job_task_claim(unit=unit) if unit is not None and unit.unit_id is not None else None
    if unit is not None and unit.unit_id is not None and run is None:
        return None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    # A retry is a new job with the same units: the sweep follows its newest job.
    Sweep.objects.filter(pk=sweep_id, job_id__lt=job.pk).update(job=job)
    sweep = Sweep.objects.get(pk=sweep_id)
    levels = sweep.cells()[cell]
    try:
        if _missing(sweep, cell):
            _check_same_generator(sweep)
        while todo := _missing(sweep, cell)[:CHUNK]:
            try:
                with transaction.atomic():
                    _make_items(sweep, cell, todo, levels)
                    job.advance(len(todo))
            except IntegrityError as error:
                # Another run of this unit wrote some of them first: read what is missing again. Nothing made by
                # anyone means the rows clash with something else (a pair imported under one of these item ids).
                if _missing(sweep, cell)[:CHUNK] == todo:
                    raise SyntheticError(f"items {todo} cannot be written: {error}") from error
                log.info("sweep %s cell %s: items made by another run of this unit", sweep.pk, cell)
            if run is not None:
                run.beat()
    except JobCancelled:
        if run is not None:
            run.cancel()
        return job
    except SyntheticError as error:  # checked when defined; a generator changed since would say so here
        with transaction.atomic():
            if run is None or run.complete():
                job.finish(result=job.result, error=f"cell {cell} ({levels}): {error}")
        return job
    with transaction.atomic():
        if run is not None and not run.complete():
            return job
        sweep_finish_if_done(job, sweep)
    return job


def sweep_finish_if_done(job: Job, sweep: Sweep) -> bool:
    """Once no unit is open: succeed with the counts, and queue the similarity of every image of the sweep."""
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if not locked.is_active or locked.tasks.filter(status__in=OPEN).exists():
        return False
    made = SweepItem.objects.filter(sweep=sweep).count()
    result = {**locked.result, "pairs": made}
    error = None if made == sweep.total else f"{made} of {sweep.total} pairs were made."
    finished = job.finish(result=result, error=error)
    if finished and made:
        from annotator.similarity.services import images_queue_embeddings

        pairs = Pair.objects.filter(sweep_item__sweep=sweep)
        ids = {i for row in pairs.values_list("image_1_id", "image_2_id") for i in row}
        images_queue_embeddings(images=Image.objects.filter(pk__in=ids).order_by("pk"), user=sweep.created_by)
    return finished


# --- Its experiment release -----------------------------------------------------------------------------------


def sweep_releases(sweep: Sweep):
    return Release.objects.filter(options__sweep=sweep.pk).order_by("number", "pk")


def sweep_publish(*, sweep: Sweep, user, key: str = "") -> Job:
    """Queue the export of the sweep's exportable pairs alone (accepted, passing the similarity check), all in the
    test split, published as the next release: the release model runs and studies of the sweep stand on."""
    from annotator.export.services import ExportOptions, export_folder_for_web, export_start

    _check_coordinator(user)
    if sweep.archived_at is not None:
        raise Conflict(f"Sweep {sweep.pk} is archived: take it out of the archive to publish it.")
    if sweep.job is None or sweep.job.status != Job.Status.SUCCEEDED:
        raise Conflict(f"Sweep {sweep.pk} is not generated yet: publish it once its job has succeeded.")
    if not Pair.objects.exportable().filter(sweep_item__sweep=sweep).exists():
        raise Conflict(
            f"Sweep {sweep.pk} has no exportable pair yet: its pairs must be accepted and pass the similarity check."
        )
    # Where the exports page puts its exports: the media bucket when media live in S3, so every host reads it.
    out = export_folder_for_web(f"sweep-{sweep.pk}-{timezone.now():%Y%m%d-%H%M%S}")
    options = ExportOptions(
        out=out,
        val_fraction=0.0,
        seed=sweep.seed,
        release=True,
        release_title=f"experiment: sweep {sweep.pk} ({sweep.title})"[:NAME_MAX],
        sweep=sweep.pk,
    )
    return export_start(options=options, user=user, idempotency_key=key)
