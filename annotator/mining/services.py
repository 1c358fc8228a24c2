"""Corpus-wide pair mining as a job (issue 27): a coordinator starts it for a collection or for all videos, the
similarity worker mines the stored vectors of the current embedding model (annotator.similarity.mining) and writes
the candidates (PairCandidate, origin mined), which wait in the data manager's Candidates table.

One unit per job. A run computes the whole ranked list again from the vectors (the same input gives the same list)
and writes it in chunks, each in its own transaction; rows it wrote before a crash are there already (the unique
(image_1, image_2) makes the second write a no-op), so a requeued unit goes on without a duplicate. Pairs that are a
candidate already (in either order, from anywhere but this job) or a Pair already are left out before diversity.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

import numpy as np
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Q

from annotator.jobs.outages import outage_of
from annotator.jobs.services import job_create_once, job_task_add, job_task_claim
from annotator.models import Collection, Image, ImageEmbedding, Job, JobCancelled, Pair, PairCandidate
from annotator.models.similarity import NO_ACTIVE_MODEL
from annotator.similarity.mining import NO_GROUP, ROW_BLOCK, MiningFilters, mine, release_memory
from annotator.similarity.services import embedding_model_active
from subtlebench.errors import Forbidden, Invalid
from subtlebench.progress import ProgressTee
from subtlebench.roles import COORDINATOR, has_role

log = logging.getLogger(__name__)

MINE_TASK = "annotator.tasks.mine_pairs"
VIDEOS = "videos"  # the scope "every frame of every video"; else a collection's id
WRITE_CHUNK = 1000  # candidates per transaction
VECTOR_CHUNK = 5000  # embeddings read per query
K_MAX = 1000
GAP_MAX = 86_400.0


def mining_options(
    *,
    scope: str,
    k: int = 2,
    same_source: bool = False,
    same_label: bool = False,
    across_videos_only: bool = False,
    min_gap: float = 0.0,
    threshold: float | None = None,
    ceiling: float | None = None,
) -> dict:
    """The checked options of a mining run (what its job records and runs with); Invalid names each bad field."""
    errors: dict = {}
    scope = str(scope or "").strip()
    if scope != VIDEOS:
        if not scope.isdigit() or len(scope) > 18 or not Collection.objects.filter(pk=int(scope)).exists():
            errors["scope"] = [f"{scope[:50]!r} is neither {VIDEOS!r} nor the id of a collection."]
    threshold = settings.SIMILARITY_THRESHOLD if threshold in (None, "") else threshold
    ceiling = settings.NEAR_DUPLICATE_CEILING if ceiling in (None, "") else ceiling
    values = {}
    for name, raw, low, high, kind in (
        ("k", k, 0, K_MAX, int),
        ("min_gap", min_gap or 0, 0.0, GAP_MAX, float),
        ("threshold", threshold, 0.0, 1.0, float),
        ("ceiling", ceiling, 0.0, 1.0001, float),
    ):
        try:
            value = kind(raw)
        except (TypeError, ValueError):
            errors[name] = [f"{str(raw)[:50]!r} is not a {'whole ' if kind is int else ''}number."]
            continue
        if not low <= value <= high:
            errors[name] = [f"{value:g} is outside {low:g} to {high:g}."]
        values[name] = value
    if "threshold" in values and "ceiling" in values and values["threshold"] >= values["ceiling"]:
        errors["ceiling"] = [f"The ceiling {values['ceiling']:g} must be above the threshold {values['threshold']:g}."]
    if across_videos_only and values.get("min_gap"):
        errors["min_gap"] = ["A time gap applies to frames of one video; across videos only never pairs those."]
    if errors:
        raise Invalid(errors)
    return {
        "scope": scope,
        "k": values["k"],
        "same_source": bool(same_source),
        "same_label": bool(same_label),
        "across_videos_only": bool(across_videos_only),
        "min_gap": values["min_gap"],
        "threshold": values["threshold"],
        "ceiling": values["ceiling"],
    }


def scope_title(scope: str) -> str:
    if scope == VIDEOS:
        return "all videos"
    collection = Collection.objects.filter(pk=int(scope)).first()
    return f"collection {collection.name}" if collection else f"collection {scope} (deleted)"


def mining_start(*, user, key: str = "", **options) -> Job:
    """Check the options and queue a mining job on the similarity worker; Invalid or Forbidden says why not.
    `user` None: `manage.py mine_pairs`, run by an operator on the server."""
    if user is not None and not has_role(user, COORDINATOR):
        raise Forbidden("Only a coordinator can mine pairs.")
    options = mining_options(**options)

    def create() -> Job:
        with transaction.atomic():
            job = Job.objects.create(
                kind=Job.Kind.MINE,
                title=f"Mine subtle pairs: {scope_title(options['scope'])}",
                created_by=user,
                idempotency_key=key,
                result={"options": options},
            )
            job_task_add(job=job, name=MINE_TASK, kwargs={"job_id": job.pk})
        return job

    job, _ = job_create_once(create, user=user, kind=Job.Kind.MINE, key=key)
    return job


# --- The worker's side ----------------------------------------------------------------------------------------


def scope_images(scope: str):
    if scope == VIDEOS:
        return Image.objects.filter(frame__isnull=False)
    return Image.objects.filter(collection_id=int(scope))


def load_vectors(scope: str, fingerprint: str, id_ranges: list[tuple[int, int]] | None = None) -> dict:
    """The scope's embedded images under the fingerprint, in id order (only ids in `id_ranges`, [low, high) each,
    when given): ids, float16 vectors and the codes the filters compare (source, label, video, timestamp), and each
    image's source, domain and collection for its rows. The vectors go straight into one array allocated for the
    count (100,000 x 1024 float16: 200 MB), never a list of rows joined at the end."""
    rows = ImageEmbedding.objects.filter(fingerprint=fingerprint, vector__isnull=False, image__in=scope_images(scope))
    if id_ranges is not None:
        within = Q(pk__in=[])
        for low, high in id_ranges:
            within |= Q(image_id__gte=low, image_id__lt=high)
        rows = rows.filter(within)
    expected = rows.count()
    rows = rows.order_by("image_id").values_list(
        "image_id",
        "vector",
        "image__source",
        "image__label",
        "image__collection_id",
        "image__collection__domain",
        "image__frame__video_id",
        "image__frame__video__domain",
        "image__frame__timestamp",
    )
    ids = np.empty(expected, dtype=np.int64)
    halves = None
    codes: dict[str, dict] = {"sources": {}, "labels": {}, "domains": {}}
    columns = {name: np.empty(expected, dtype=np.int64) for name in ("sources", "labels", "videos", "collections")}
    columns["domains"] = np.empty(expected, dtype=np.int64)
    times = np.empty(expected, dtype=np.float64)

    def code(kind: str, value: str) -> int:
        return codes[kind].setdefault(value, len(codes[kind]))

    count = 0
    for row in rows.iterator(chunk_size=VECTOR_CHUNK):
        vector = np.frombuffer(bytes(row[1]), dtype="<f2")
        if halves is None:
            halves = np.empty((expected, len(vector)), dtype="<f2")
        if count == len(ids):  # rows embedded since the count: grow (rare)
            grow = max(1, count // 8)
            ids, times = np.resize(ids, count + grow), np.resize(times, count + grow)
            halves = np.concatenate([halves, np.empty((grow, halves.shape[1]), "<f2")])
            columns = {name: np.resize(values, count + grow) for name, values in columns.items()}
        ids[count] = row[0]
        halves[count] = vector
        columns["sources"][count] = code("sources", row[2])
        columns["labels"][count] = code("labels", row[3]) if row[3] else NO_GROUP
        columns["collections"][count] = row[4] if row[4] is not None else NO_GROUP
        columns["domains"][count] = code("domains", row[5] or row[7] or "")
        columns["videos"][count] = row[6] if row[6] is not None else NO_GROUP
        times[count] = row[8] if row[8] is not None else 0.0
        count += 1
    if halves is None:
        halves = np.zeros((0, 1), "<f2")
    return {
        "ids": ids[:count],
        "halves": halves[:count],
        "groups": {
            "sources": columns["sources"][:count],
            "labels": columns["labels"][:count],
            "videos": columns["videos"][:count],
            "times": times[:count],
        },
        "meta": {
            "collections": columns["collections"][:count],
            "sources": columns["sources"][:count],
            "domains": columns["domains"][:count],
            "source_names": list(codes["sources"]),
            "domain_names": list(codes["domains"]),
        },
    }


def taken_pairs(scope: str, job: Job) -> set[tuple[int, int]]:
    """(smaller id, larger id) of every pair among these images that is a candidate already (not of this job: its
    own rows are what a resumed run writes again) or a Pair already."""
    taken = set()
    for others in (PairCandidate.objects.exclude(job=job), Pair.objects.all()):
        images = scope_images(scope).values("pk")
        rows = others.filter(image_1__in=images, image_2__in=images).values_list("image_1_id", "image_2_id")
        taken.update((min(a, b), max(a, b)) for a, b in rows.iterator(chunk_size=10_000))
    return taken


def mining_run(*, job_id: int, unit=None, device: str | None = None, progress=None) -> Job | None:
    """What the task (and `mine_pairs --sync`) calls: claim the unit, mine, write the candidates, finish the job."""
    run = None
    if unit is not None and unit.unit_id is not None:
        run = job_task_claim(unit=unit)
        if run is None:
            return None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    tracker = ProgressTee(run or job, progress)
    options = job.result["options"]
    model = embedding_model_active(fresh=True)
    if model is None:
        return _fail(job, run, f"{NO_ACTIVE_MODEL}: mining reads the vectors of the current model.")
    data = mined = None
    try:
        data = load_vectors(options["scope"], model.fingerprint)
        count = len(data["ids"])
        blocks = max(1, -(-count // ROW_BLOCK))
        job.refresh_from_db(fields=["done"])
        tracker.start(total=job.done + blocks + 1)  # a resumed run goes on from what the first one counted
        taken = taken_pairs(options["scope"], job)

        def skip(first_ids: np.ndarray, second_ids: np.ndarray) -> np.ndarray:
            return np.array(
                [(a, b) in taken for a, b in zip(first_ids.tolist(), second_ids.tolist(), strict=True)], dtype=bool
            )

        filters = MiningFilters(
            same_source=options["same_source"],
            same_label=options["same_label"],
            across_videos_only=options["across_videos_only"],
            min_gap=options["min_gap"],
        )
        mined = mine(
            data["halves"],
            data["ids"],
            threshold=options["threshold"],
            ceiling=options["ceiling"],
            filters=filters,
            groups=data["groups"],
            k=options["k"],
            skip=skip,
            device=device or settings.DINOV3_DEVICE,
            progress=lambda done, total: tracker.advance(1) if count >= 2 else None,
        )
        if count < 2:
            tracker.advance(blocks)
        written = _write(job, run, model.fingerprint, data, mined)
        tracker.advance(1)
    except JobCancelled:
        if run is not None:
            run.cancel()
        return job
    except (OperationalError, InterfaceError):
        raise  # the database away: the task retries and the run goes on
    except Exception as error:  # e.g. out of memory: the job must not stay "running"
        if outage_of(error) is not None:
            raise  # a dependency is away: the unit pauses with the reason and runs again when it is back
        log.exception("mining job %s stopped", job.pk)
        return _fail(job, run, f"the run stopped: {type(error).__name__}: {error}")
    finally:
        # The vectors, their int8 copy and the survivors are hundreds of MB: the worker gives them back now.
        in_range = mined.in_range if mined is not None else 0
        del data, mined
        release_memory()
    result = {
        "options": options,
        "model": model.fingerprint,
        "filters": asdict(filters),
        "images": count,
        "in_range": in_range,
        "candidates": PairCandidate.objects.filter(job=job).count(),
        "written_now": written,
    }
    with transaction.atomic():
        if run is None or run.complete():
            job.finish(result=result)
    return job


def _fail(job: Job, run, message: str) -> Job:
    log.error("mining job %s (%s): %s", job.pk, job.title, message)
    with transaction.atomic():
        if run is None or run.complete(status="failed"):
            job.finish(result=job.result, error=message)
    return job


def _write(job: Job, run, fingerprint: str, data: dict, mined) -> int:
    """The candidates in rank order, WRITE_CHUNK per transaction; a pair written already (by this job before a
    crash, or by anyone since) is left as it is. How many rows this run added."""
    ids, meta = data["ids"], data["meta"]
    collections, sources, domains = meta["collections"], meta["sources"], meta["domains"]
    before = PairCandidate.objects.filter(job=job).count()
    for at in range(0, len(mined.first), WRITE_CHUNK):
        rows = []
        for one, two, value in zip(
            mined.first[at : at + WRITE_CHUNK].tolist(),
            mined.second[at : at + WRITE_CHUNK].tolist(),
            mined.similarity[at : at + WRITE_CHUNK].tolist(),
            strict=True,
        ):
            same_collection = collections[one] != NO_GROUP and collections[one] == collections[two]
            same_source = sources[one] == sources[two]
            rows.append(
                PairCandidate(
                    image_1_id=int(ids[one]),
                    image_2_id=int(ids[two]),
                    origin=PairCandidate.Origin.MINED,
                    collection_id=int(collections[one]) if same_collection else None,
                    domain=meta["domain_names"][domains[one]],
                    source=meta["source_names"][sources[one]] if same_source else "mixed",
                    similarity=value,
                    similarity_model=fingerprint,
                    job=job,
                )
            )
        with transaction.atomic():
            PairCandidate.objects.bulk_create(rows, ignore_conflicts=True, batch_size=WRITE_CHUNK)
        if run is not None:
            run.beat()  # and stops here when the job was cancelled meanwhile
    return PairCandidate.objects.filter(job=job).count() - before
