"""Corpus-wide pair mining as a job (issue 27): a coordinator starts it for a collection or for all videos, the
similarity worker mines the stored vectors of the current embedding model (annotator.similarity.mining) and writes
the candidates (PairCandidate, origin mined), which wait in the data manager's Candidates table.

A job starts with one unit. Over at most MINING_BLOCK_ROWS images it mines them all; over more it cuts them (in id
order) into blocks of that many and adds one unit per block pair (block i against block j, j >= i; any similarity
worker takes one), each of which stores its exactly scored in-range pairs (MinedBlock); the unit that completes the
last of them adds the merge unit, which ranks all of them in the same total order, thins them and writes the
candidates: the same candidates as one worker's run, since the in-range set is exact and the order total.

A run computes its ranked list again from the vectors (the same input gives the same list) and writes it in chunks,
each in its own transaction; rows it wrote before a crash are there already (the unique (image_1, image_2) makes the
second write a no-op), so a requeued unit goes on without a duplicate. Pairs that are a candidate already (in either
order, from anywhere but this job) or a Pair already are left out before diversity.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

import numpy as np
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Q

from annotator.jobs.outages import outage_of
from annotator.jobs.services import OPEN, job_create_once, job_task_add, job_task_claim
from annotator.models import Collection, Image, ImageEmbedding, Job, JobCancelled, MinedBlock, Pair, PairCandidate
from annotator.models.similarity import NO_ACTIVE_MODEL
from annotator.similarity.mining import (
    NO_GROUP,
    ROW_BLOCK,
    MiningFilters,
    choose,
    in_range_pairs,
    mine,
    release_memory,
)
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
        elif Collection.objects.filter(pk=int(scope), archived_at__isnull=False).exists():
            errors["scope"] = ["That collection is archived: mining leaves it out. Take it out of the archive first."]
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


def load_vectors(scope: str, fingerprint: str, id_ranges: list[list[int]] | None = None) -> dict:
    """The scope's embedded images under the fingerprint, in id order (only ids in `id_ranges`, [low, high) each,
    when given): ids, float16 vectors and the codes the filters compare (source, label, video, timestamp). The
    vectors go straight into one array allocated for the count (100,000 x 1024 float16: 200 MB), never a list of
    rows joined at the end."""
    rows = ImageEmbedding.objects.filter(fingerprint=fingerprint, vector__isnull=False, image__in=scope_images(scope))
    if id_ranges is not None:
        within = Q(pk__in=[])
        for low, high in id_ranges:
            within |= Q(image_id__gte=low, image_id__lt=high)
        rows = rows.filter(within)
    expected = rows.count()
    rows = rows.order_by("image_id", "pk").values_list(
        "image_id",
        "vector",
        "image__source",
        "image__label",
        "image__frame__video_id",
        "image__frame__timestamp",
    )
    ids = np.empty(expected, dtype=np.int64)
    halves = None
    codes: dict[str, dict] = {"sources": {}, "labels": {}}
    columns = {name: np.empty(expected, dtype=np.int64) for name in ("sources", "labels", "videos")}
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
        columns["videos"][count] = row[4] if row[4] is not None else NO_GROUP
        times[count] = row[5] if row[5] is not None else 0.0
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


def _skipper(taken: set[tuple[int, int]]):
    """The `skip` of `mine`/`choose`: the mask of pairs in `taken`. Nothing taken: no Python object per pair (two
    lists of a million ints each are what a worker's heap would keep after the job)."""

    def skip(first_ids: np.ndarray, second_ids: np.ndarray) -> np.ndarray:
        if not taken:
            return np.zeros(len(first_ids), dtype=bool)
        pairs = zip(first_ids.tolist(), second_ids.tolist(), strict=True)
        return np.array([pair in taken for pair in pairs], dtype=bool)

    return skip


def mining_run(
    *, job_id: int, unit=None, device: str | None = None, progress=None, block: list | None = None, merge: bool = False
) -> Job | None:
    """What the task (and `mine_pairs --sync`) calls: claim the unit and do its part. The job's first unit mines
    every image and writes the candidates, or, over more than MINING_BLOCK_ROWS images (and as a queued unit), adds
    the block pairs' units; `block` [i, j]: one block pair; `merge`: the candidates from every block pair."""
    run = None
    if unit is not None and unit.unit_id is not None:
        run = job_task_claim(unit=unit)
        if run is None:
            return None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    if block is not None or merge:
        return _run_part(job, run, block=block, device=device)
    tracker = ProgressTee(run or job, progress)
    options = job.result["options"]
    model = embedding_model_active(fresh=True)
    if model is None:
        return _fail(job, run, f"{NO_ACTIVE_MODEL}: mining reads the vectors of the current model.")
    if run is not None and _spread(job, run, model.fingerprint):
        return job
    data = mined = None
    try:
        data = load_vectors(options["scope"], model.fingerprint)
        count = len(data["ids"])
        blocks = max(1, -(-count // ROW_BLOCK))
        job.refresh_from_db(fields=["done"])
        tracker.start(total=job.done + blocks + 1)  # a resumed run goes on from what the first one counted
        taken = taken_pairs(options["scope"], job)

        skip = _skipper(taken)

        filters = _filters(options)
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
        ids = data["ids"]
        written = _write(job, run, model.fingerprint, ids[mined.first], ids[mined.second], mined.similarity)
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
        _give_memory_back()
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


def _give_memory_back() -> None:
    """The end of a unit: its arrays given back (`release_memory`), and the database connection closed (Django opens
    another on the next query) outside a transaction: libpq keeps its buffers as large as the largest message it
    sent or read, and a block pair's arrays travel as one row (tens of MB in hex), which kept a worker 30 MB above
    idle after a block pair or the merge."""
    if not connection.in_atomic_block:
        connection.close()
    release_memory()


def _fail(job: Job, run, message: str) -> Job:
    log.error("mining job %s (%s): %s", job.pk, job.title, message)
    with transaction.atomic():
        if run is None or run.complete(status="failed"):
            job.finish(result=job.result, error=message)
    return job


def _image_fields(ids: np.ndarray) -> dict:
    """(collection id, source, domain) of each image in `ids` (ascending, unique), as arrays in that order: the
    collection (NO_GROUP for none) and codes into the lists of distinct sources and domains. A chunk's rows become
    arrays before the next is read, so no Python object per image outlives it: a dict of tuples per image is what
    kept tens of MB of a worker's heap after the job (its arenas pinned by the few objects that lived on)."""
    collections = np.full(len(ids), NO_GROUP, dtype=np.int64)
    sources = np.zeros(len(ids), dtype=np.int64)
    domains = np.zeros(len(ids), dtype=np.int64)
    found = np.zeros(len(ids), dtype=bool)
    names: dict[str, dict[str, int]] = {"sources": {}, "domains": {}}
    for at in range(0, len(ids), VECTOR_CHUNK):
        rows = Image.objects.filter(pk__in=ids[at : at + VECTOR_CHUNK].tolist()).values_list(
            "pk", "collection_id", "source", "collection__domain", "frame__video__domain"
        )
        pks, chunk_collections, chunk_sources, chunk_domains = [], [], [], []
        for pk, collection, source, domain, video_domain in rows:
            pks.append(pk)
            chunk_collections.append(NO_GROUP if collection is None else collection)
            chunk_sources.append(names["sources"].setdefault(source, len(names["sources"])))
            domain = domain or video_domain or ""
            chunk_domains.append(names["domains"].setdefault(domain, len(names["domains"])))
        where = np.searchsorted(ids, np.array(pks, dtype=np.int64))
        collections[where] = chunk_collections
        sources[where] = chunk_sources
        domains[where] = chunk_domains
        found[where] = True
        del rows, pks, chunk_collections, chunk_sources, chunk_domains
    if not found.all():
        raise LookupError(f"image {int(ids[~found][0])} is gone")
    return {
        "ids": ids,
        "collections": collections,
        "sources": sources,
        "domains": domains,
        "source_names": list(names["sources"]),
        "domain_names": list(names["domains"]),
    }


def _write(job: Job, run, fingerprint: str, first_ids, second_ids, similarity) -> int:
    """The candidates (image ids, first < second) in rank order, WRITE_CHUNK per transaction; a pair written already
    (by this job before a crash, or by anyone since) is left as it is. How many rows this run added. The image
    fields are arrays, and each chunk's rows are built from them and dropped with the chunk."""
    fields = _image_fields(np.unique(np.concatenate([first_ids, second_ids])))
    source_names = [*fields["source_names"], "mixed"]  # code -1: the two images' sources differ
    domain_names = fields["domain_names"]
    before = PairCandidate.objects.filter(job=job).count()
    for at in range(0, len(first_ids), WRITE_CHUNK):
        one = np.searchsorted(fields["ids"], first_ids[at : at + WRITE_CHUNK])
        two = np.searchsorted(fields["ids"], second_ids[at : at + WRITE_CHUNK])
        collection = fields["collections"][one]
        collection = np.where(collection == fields["collections"][two], collection, NO_GROUP)
        source = fields["sources"][one]
        source = np.where(source == fields["sources"][two], source, -1)
        rows = [
            PairCandidate(
                image_1_id=image_1,
                image_2_id=image_2,
                origin=PairCandidate.Origin.MINED,
                collection_id=None if in_collection == NO_GROUP else in_collection,
                domain=domain_names[domain],
                source=source_names[source_code],
                similarity=value,
                similarity_model=fingerprint,
                job=job,
            )
            for image_1, image_2, in_collection, domain, source_code, value in zip(
                first_ids[at : at + WRITE_CHUNK].tolist(),
                second_ids[at : at + WRITE_CHUNK].tolist(),
                collection.tolist(),
                fields["domains"][one].tolist(),
                source.tolist(),
                similarity[at : at + WRITE_CHUNK].tolist(),
                strict=True,
            )
        ]
        with transaction.atomic():
            PairCandidate.objects.bulk_create(rows, ignore_conflicts=True, batch_size=WRITE_CHUNK)
        del rows
        if run is not None:
            run.beat()  # and stops here when the job was cancelled meanwhile
    return PairCandidate.objects.filter(job=job).count() - before


# --- A job spread over workers: block pairs, then the merge -----------------------------------------------------


def _filters(options: dict) -> MiningFilters:
    return MiningFilters(
        same_source=options["same_source"],
        same_label=options["same_label"],
        across_videos_only=options["across_videos_only"],
        min_gap=options["min_gap"],
    )


def _spread(job: Job, run, fingerprint: str) -> bool:
    """Over more than MINING_BLOCK_ROWS images: cut them into blocks (id ranges), add one unit per block pair, and
    complete this first unit, in one transaction. False: few enough for this unit to mine them all."""
    size = settings.MINING_BLOCK_ROWS
    ids = list(
        ImageEmbedding.objects.filter(
            fingerprint=fingerprint, vector__isnull=False, image__in=scope_images(job.result["options"]["scope"])
        )
        .order_by("image_id")
        .values_list("image_id", flat=True)
    )
    if len(ids) <= size:
        return False
    starts = ids[::size]
    edges = [[low, high] for low, high in zip(starts, [*starts[1:], ids[-1] + 1], strict=True)]
    units = [[i, j] for i in range(len(edges)) for j in range(i, len(edges))]
    with transaction.atomic():
        if not run.complete():
            return True
        job.result = {**job.result, "model": fingerprint, "images": len(ids), "blocks": edges, "units": len(units)}
        job.save(update_fields=["result"])
        job.start(total=len(units) + 1)
        for pair in units:
            job_task_add(job=job, name=MINE_TASK, kwargs={"job_id": job.pk, "block": pair})
    return True


def _run_part(job: Job, run, *, block: list | None, device: str | None) -> Job:
    """One block pair's in-range pairs into a MinedBlock (and the merge queued after the last), or the merge."""
    try:
        if block is None:
            _merge(job, run)
            return job
        options, edges = job.result["options"], job.result["blocks"]
        i, j = block
        data = load_vectors(options["scope"], job.result["model"], [edges[i]] if i == j else [edges[i], edges[j]])
        first, second, similarity, checked = in_range_pairs(
            data["halves"],
            threshold=options["threshold"],
            ceiling=options["ceiling"],
            filters=_filters(options),
            groups=data["groups"],
            rows_end=None if i == j else int(np.searchsorted(data["ids"], edges[j][0])),
            device=device or settings.DINOV3_DEVICE,
        )
        ids = data["ids"]  # in id order, so first < second holds for the ids too
        values = {
            "first_ids": ids[first].astype("<i8").tobytes(),
            "second_ids": ids[second].astype("<i8").tobytes(),
            "similarities": similarity.astype("<f8").tobytes(),
            "checked": checked,
        }
        del data, first, second, similarity
        with transaction.atomic():
            if run is not None and not run.complete():
                return job
            MinedBlock.objects.update_or_create(job=job, row_block=i, column_block=j, defaults=values)
            job.advance(1)
            locked = Job.objects.select_for_update().get(pk=job.pk)
            if not locked.tasks.filter(status__in=OPEN).exists():
                job_task_add(job=job, name=MINE_TASK, kwargs={"job_id": job.pk, "merge": True})
    except JobCancelled:
        if run is not None:
            run.cancel()
    except (OperationalError, InterfaceError):
        raise
    except Exception as error:
        if outage_of(error) is not None:
            raise
        log.exception("mining job %s stopped", job.pk)
        return _fail(job, run, f"the run stopped: {type(error).__name__}: {error}")
    finally:
        _give_memory_back()
    return job


def _merge(job: Job, run) -> None:
    """Every block pair's pairs, ranked in the one total order, thinned, written; the job finished with the counts."""
    options = job.result["options"]
    expected = job.result["units"]
    # One block pair's row at a time, straight into arrays (no model instance, no bytes kept beside the arrays).
    keys = list(MinedBlock.objects.filter(job=job).order_by("row_block", "column_block").values_list("pk", flat=True))
    if len(keys) != expected:
        raise RuntimeError(f"{len(keys)} of {expected} block pairs were mined")
    parts: dict[str, list] = {"first_ids": [], "second_ids": [], "similarities": []}
    checked = 0
    for key in keys:
        row = MinedBlock.objects.filter(pk=key).values("first_ids", "second_ids", "similarities", "checked").get()
        parts["first_ids"].append(np.frombuffer(row["first_ids"], "<i8").astype(np.int64))
        parts["second_ids"].append(np.frombuffer(row["second_ids"], "<i8").astype(np.int64))
        parts["similarities"].append(np.frombuffer(row["similarities"], "<f8").astype(np.float64))
        checked += row["checked"]
        del row
    first_ids, second_ids, similarity = (np.concatenate(parts[name]) for name in parts)
    del parts
    taken = taken_pairs(options["scope"], job)

    skip = _skipper(taken)

    picked = choose(first_ids, second_ids, similarity, k=options["k"], skip=skip)
    written = _write(job, run, job.result["model"], first_ids[picked], second_ids[picked], similarity[picked])
    result = {
        "options": options,
        "model": job.result["model"],
        "filters": asdict(_filters(options)),
        "images": job.result["images"],
        "units": job.result["units"],
        "in_range": len(first_ids),
        "checked": checked,
        "candidates": PairCandidate.objects.filter(job=job).count(),
        "written_now": written,
    }
    with transaction.atomic():
        if run is None or run.complete():
            job.advance(1)
            if job.finish(result=result):
                MinedBlock.objects.filter(job=job).delete()
