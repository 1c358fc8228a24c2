"""Similarity, the Django side: the current embedding model, stored embeddings, pair scores, suggestions, jobs.

numpy only. The current model is a database row (`EmbeddingModel`, made current by `manage.py check_dinov3
--activate FOLDER`): the web process and beat read its fingerprint and never open the weights, nor read any
DINOV3_* setting. The torch path (`annotator.similarity.embedder`) is imported by `worker_embedder()` alone,
which only the similarity worker and the commands that embed reach.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import InterfaceError, OperationalError, models, transaction
from django.utils import timezone

from annotator.jobs.outages import outage_of
from annotator.jobs.services import job_task_add, job_task_claim
from annotator.models import EmbeddingModel, Frame, Image, ImageEmbedding, Job, JobCancelled, Pair, Video
from annotator.models.similarity import NO_ACTIVE_MODEL
from annotator.similarity.exact import FLOAT16_STEPS, cosine, cosines, integer_vectors  # noqa: F401 (their home)
from benchmark import jsonlimits
from subtlebench.errors import Forbidden, Invalid
from subtlebench.progress import ProgressTee
from subtlebench.roles import COORDINATOR, has_role

log = logging.getLogger(__name__)

DEMO_MARKER = "UNTRAINED_DEMO_MODEL"
DEMO_BANNER = (
    "similarity from an untrained demo model: activate real DINOv3 weights with "
    "manage.py check_dinov3 --activate FOLDER"
)
MODEL_TYPE = "dinov3_vit"
PAIR_CHUNK = 2000


# --- Model folders and their fingerprints (the worker and check_dinov3) -----------------------------------------


def weight_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.safetensors")) or sorted(folder.glob("pytorch_model*.bin"))


def model_problem(folder: Path) -> str | None:
    """Why the folder cannot be DINOv3 weights (file checks only, no torch), or None."""
    if not folder.is_dir():
        return f"{folder}: no such folder."
    config = folder / "config.json"
    if not config.is_file():
        return f"{folder}: config.json is missing; this is not a HuggingFace model folder."
    try:
        model_type = jsonlimits.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (ValueError, AttributeError) as error:
        return f"{config}: not a valid JSON object ({error})."
    if model_type != MODEL_TYPE:
        return f"{config}: model_type is {model_type!r}; DINOv3 ViT weights have {MODEL_TYPE!r}."
    if not weight_files(folder):
        return f"{folder}: no weights in it (*.safetensors or pytorch_model.bin)."
    return None


def dtype_name(device: str) -> str:
    """The dtype the embedder runs in on this device (see embedder.dtype_for), as fingerprints name it."""
    return "bf16" if str(device).startswith("cuda") else "fp32"


def weights_digest(folder: Path) -> str:
    """A digest of the config and of 16 evenly spaced 1 MiB samples of each weights file, with its size.

    Hashing whole files would cost seconds to minutes per process for large models; samples of the bytes
    tell different weights apart just as well in practice.
    """
    digest = hashlib.sha256((folder / "config.json").read_bytes())
    for path in weight_files(folder):
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}".encode())
        with open(path, "rb") as handle:
            for sample in range(16):
                handle.seek(size * sample // 16)
                digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:12]


_fingerprints: dict[tuple, str] = {}


def fingerprint_of(folder: Path, image_size: int, dtype: str) -> str:
    """'dinov3 1024d 24L <digest> 224px bf16': which weights, input size and dtype produce a vector."""
    config_path = folder / "config.json"
    signature = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in [config_path, *weight_files(folder)])
    key = (str(folder), signature, image_size, dtype)
    if key not in _fingerprints:
        config = jsonlimits.loads(config_path.read_text(encoding="utf-8"))
        name = f"dinov3 {config.get('hidden_size')}d {config.get('num_hidden_layers')}L"
        text = f"{name} {weights_digest(folder)} {image_size}px {dtype}"
        if (folder / DEMO_MARKER).exists():
            text = f"untrained demo model: {text}"
        _fingerprints[key] = text
    return _fingerprints[key]


# --- The current model: a row ----------------------------------------------------------------------------------


def embedding_model_forget_cached() -> None:
    """Drop this process's cached active row (after an activation here; tests between two tests)."""
    EmbeddingModel.objects.forget_cached()


def embedding_model_active(*, fresh: bool = False) -> EmbeddingModel | None:
    """The current embedding model, or None while none is active (then every image and pair is pending)."""
    return EmbeddingModel.objects.current(fresh=fresh)


def current_fingerprint(fresh: bool = False) -> str | None:
    """The active model's fingerprint: similarities and vectors under any other one are stale. None: no model."""
    return EmbeddingModel.objects.current_fingerprint(fresh=fresh)


def embedding_model_activate(*, folder: Path, device: str, image_size: int, activated_by: str = "") -> EmbeddingModel:
    """Record the folder's model (as it runs on `device` at `image_size`) and make it the current one.

    Switching makes every similarity and vector of the previous model stale (pending until the similarity
    worker re-embeds and rescores); switching back to an earlier model makes its scores current again.
    Checks the files only: `check_dinov3 --activate` loads and tests the model before calling this.
    """
    folder = Path(folder).resolve()
    problem = model_problem(folder)
    if problem:
        raise Invalid(problem)
    dtype = dtype_name(device)
    fingerprint = fingerprint_of(folder, image_size, dtype)
    config = jsonlimits.loads((folder / "config.json").read_text(encoding="utf-8"))
    with transaction.atomic():
        # Lock the current row, so two activations at once queue up instead of tripping the constraint.
        list(EmbeddingModel.objects.select_for_update().filter(active=True))
        EmbeddingModel.objects.filter(active=True).exclude(fingerprint=fingerprint).update(active=False)
        model, _ = EmbeddingModel.objects.update_or_create(
            fingerprint=fingerprint,
            defaults={
                "dim": int(config.get("hidden_size") or 0),
                "layers": int(config.get("num_hidden_layers") or 0),
                "dtype": dtype,
                "image_size": image_size,
                "folder": str(folder),
                "demo": (folder / DEMO_MARKER).exists(),
                "active": True,
                "activated_at": timezone.now(),
                "activated_by": activated_by[:200],
            },
        )
    embedding_model_forget_cached()
    log.info("embedding model activated: %s (from %s, by %s)", fingerprint, folder, activated_by or "?")
    return model


def embedding_model_summary(model: EmbeddingModel | None) -> dict | None:
    """What the API and pages show of a model row."""
    if model is None:
        return None
    return {
        "fingerprint": model.fingerprint,
        "dim": model.dim,
        "layers": model.layers,
        "dtype": model.dtype,
        "image_size": model.image_size,
        "demo": model.demo,
        "folder": model.folder,
        "activated_at": model.activated_at,
        "activated_by": model.activated_by,
    }


def embedding_model_context() -> dict:
    """What the pages that show the current model (jobs, videos) need: templates/similarity/_model.html."""
    return {"embedding_model": embedding_model_active(), "no_embedding_model": NO_ACTIVE_MODEL}


# --- The similarity worker's model ----------------------------------------------------------------------------


def worker_model_folder(model: EmbeddingModel) -> Path:
    """Where this worker reads the active model: DINOV3_MODEL_DIR when set (e.g. another mount point of the
    same weights), else the folder it was activated from."""
    return Path(settings.DINOV3_MODEL_DIR or model.folder)


def worker_model_problem(model: EmbeddingModel | None) -> str | None:
    """Why this worker must not embed under the active model, or None.

    The worker fingerprints its folder with its own device (dtype), at the active row's input size, and
    refuses unless that is the active fingerprint: vectors are never stored under a model that is not current.
    """
    if model is None:
        return f"{NO_ACTIVE_MODEL}. Images and pairs stay pending until then."
    folder = worker_model_folder(model)
    problem = model_problem(folder)
    if problem:
        return f"cannot read the active model's weights: {problem}"
    try:
        mine = fingerprint_of(folder, model.image_size, dtype_name(settings.DINOV3_DEVICE))
    except OSError as error:
        return f"cannot read the active model's weights in {folder}: {error}"
    if mine != model.fingerprint:
        return (
            f"refusing to embed: this worker's model ({folder} on DINOV3_DEVICE={settings.DINOV3_DEVICE}) has the "
            f"fingerprint '{mine}', but the active model is '{model.fingerprint}'. Give the worker the active "
            "model's weights and device, or activate its folder with manage.py check_dinov3 --activate."
        )
    return None


_embedders: dict[tuple, object] = {}


def worker_embedder(model: EmbeddingModel):
    """The active model, loaded once per worker process (after the fork) and kept for its next tasks."""
    from annotator.similarity.embedder import Embedder

    folder = worker_model_folder(model)
    key = (str(folder), model.fingerprint, settings.DINOV3_DEVICE, settings.DINOV3_BATCH_SIZE)
    if key not in _embedders:
        _embedders.clear()
        log.info("loading DINOv3 from %s on %s (%s)", folder, settings.DINOV3_DEVICE, model.fingerprint)
        _embedders[key] = Embedder.load(
            folder,
            device=settings.DINOV3_DEVICE,
            image_size=model.image_size,
            batch_size=settings.DINOV3_BATCH_SIZE,
            decode_threads=settings.DINOV3_DECODE_THREADS or None,
            decode_timeout=settings.DINOV3_DECODE_TIMEOUT,
        )
    return _embedders[key]


# --- Stored vectors --------------------------------------------------------------------------------------------


def vector_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f2").tobytes()


def stored_integer_vectors(image_ids: Iterable[int], fingerprint: str | None = None) -> dict[int, np.ndarray]:
    """Image id -> its stored vector under the fingerprint (default: the current one) as exact integers
    (`stack_vectors`), what every similarity is computed from. Nothing while no model is active."""
    fingerprint = fingerprint or current_fingerprint()
    if fingerprint is None:
        return {}
    rows = list(
        ImageEmbedding.objects.filter(
            image_id__in=set(image_ids), fingerprint=fingerprint, vector__isnull=False
        ).values_list("image_id", "vector")
    )
    if not rows:
        return {}
    ids, matrix = stack_vectors(rows)
    return dict(zip(ids, matrix, strict=True))


def stored_vectors(image_ids: Iterable[int], fingerprint: str | None = None) -> dict[int, np.ndarray]:
    """Image id -> its stored vector under the fingerprint, as a float64 unit vector (renormalised after float16
    storage): for reading and comparing, not for similarities (`cosines` works on the exact integers)."""
    return {
        image_id: vector / max(np.linalg.norm(vector), 1e-12)
        for image_id, vector in stored_integer_vectors(image_ids, fingerprint).items()
    }


def stack_vectors(rows: list[tuple[int, bytes]]) -> tuple[list[int], np.ndarray]:
    """[(image id, float16 bytes)] -> ids and an (N, D) int64 matrix: each value times 2**24, exactly."""
    ids = [image_id for image_id, _ in rows]
    halves = np.frombuffer(b"".join(bytes(vector) for _, vector in rows), dtype="<f2").reshape(len(rows), -1)
    return ids, integer_vectors(halves)


def embeddings_store(*, fingerprint: str, vectors: dict[int, np.ndarray], failures: dict[int, str]) -> None:
    """Store vectors (and failures) of images under the fingerprint; re-running replaces, never duplicates."""
    rows = [
        ImageEmbedding(image_id=image_id, fingerprint=fingerprint, vector=vector_bytes(v), dim=len(v))
        for image_id, v in vectors.items()
    ]
    rows += [
        ImageEmbedding(image_id=image_id, fingerprint=fingerprint, vector=None, dim=0, error=message[:2000])
        for image_id, message in failures.items()
    ]
    ImageEmbedding.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["image", "fingerprint"],
        update_fields=["vector", "dim", "error", "created"],
    )


# --- Pairs -----------------------------------------------------------------------------------------------------


def images_similarity(*, image_1: Image, image_2: Image) -> float | None:
    """The cosine similarity of two images under the current model, or None while either is not embedded."""
    vectors = stored_integer_vectors([image_1.pk, image_2.pk])
    if image_1.pk not in vectors or image_2.pk not in vectors:
        return None
    return cosine(vectors[image_1.pk], vectors[image_2.pk])


def similarity_verdict(value: float | None) -> str:
    if value is None:
        return "pending"
    return "pass" if value >= settings.SIMILARITY_THRESHOLD else "fail"


@transaction.atomic
def pair_update_similarity(*, pair: Pair) -> float | None:
    """Score the pair from its images' stored embeddings under the current model; None (pending) without them."""
    fingerprint = current_fingerprint()
    value = images_similarity(image_1=pair.image_1, image_2=pair.image_2)
    if value is None:
        return None
    Pair.objects.filter(pk=pair.pk).update(similarity=value, similarity_model=fingerprint, updated=timezone.now())
    pair.similarity, pair.similarity_model = value, fingerprint
    return value


@transaction.atomic
def pair_override_similarity(*, pair: Pair, user, reason: str) -> Pair:
    """A coordinator lets a pair below the threshold through, with a written reason that is recorded."""
    if not has_role(user, COORDINATOR):
        raise Forbidden("Only a coordinator can override the similarity rule.")
    reason = (reason or "").strip()
    if not reason:
        raise Invalid({"reason": "Write why this pair is subtle despite its similarity score."})
    locked = Pair.objects.select_for_update().get(pk=pair.pk)
    if locked.similarity_status != "fail":
        raise Invalid(
            f"Pair {pair.pk}: only a pair that fails the similarity rule can be overridden; "
            f"its similarity is {locked.similarity_status}."
        )
    locked.similarity_override_reason = reason
    locked.similarity_override_by = user
    locked.similarity_override_at = timezone.now()
    locked.save(update_fields=["similarity_override_reason", "similarity_override_by", "similarity_override_at"])
    for name in ("similarity_override_reason", "similarity_override_by", "similarity_override_at"):
        setattr(pair, name, getattr(locked, name))
    return pair


@transaction.atomic
def pairs_update_similarity(*, image_ids: Iterable[int] | None = None) -> int:
    """Score every pending or stale pair (those touching `image_ids`, if given) whose images are embedded.

    Vectorised: one query for the vectors of a chunk of pairs, one dot product per row, one bulk update.
    Returns how many pairs got a similarity.
    """
    fingerprint = current_fingerprint()
    if fingerprint is None:
        return 0
    pairs = Pair.objects.needing_similarity().order_by("pk")
    if image_ids is not None:
        ids = set(image_ids)
        pairs = pairs.filter(models.Q(image_1_id__in=ids) | models.Q(image_2_id__in=ids))
    scored = 0
    last = 0
    while True:
        chunk = list(pairs.filter(pk__gt=last).only("pk", "image_1_id", "image_2_id")[:PAIR_CHUNK])
        if not chunk:
            return scored
        last = chunk[-1].pk
        vectors = stored_integer_vectors({p.image_1_id for p in chunk} | {p.image_2_id for p in chunk}, fingerprint)
        ready = [p for p in chunk if p.image_1_id in vectors and p.image_2_id in vectors]
        if not ready:
            continue
        first = np.stack([vectors[p.image_1_id] for p in ready])
        second = np.stack([vectors[p.image_2_id] for p in ready])
        values = cosines(first, second)
        now = timezone.now()
        for pair, value in zip(ready, values, strict=True):
            pair.similarity, pair.similarity_model, pair.updated = float(value), fingerprint, now
        Pair.objects.bulk_update(ready, ["similarity", "similarity_model", "updated"], batch_size=500)
        scored += len(ready)


# --- Videos: status and suggestions ---------------------------------------------------------------------------


def video_embedding_counts(*, video: Video) -> dict:
    """How many of the video's frames are embedded, failed or pending under the current model, and which it is."""
    model = embedding_model_active()
    fingerprint = model.fingerprint if model is not None else None
    embeddings = ImageEmbedding.objects.filter(image__frame__video=video, fingerprint=fingerprint)
    counts = embeddings.aggregate(
        embedded=models.Count("pk", filter=models.Q(vector__isnull=False)),
        failed=models.Count("pk", filter=models.Q(vector__isnull=True)),
    )
    frames = Frame.objects.filter(video=video).count()
    return {
        "frames": frames,
        "embedded": counts["embedded"],
        "failed": counts["failed"],
        "pending": frames - counts["embedded"] - counts["failed"],
        "model": fingerprint,
        "model_problem": None if model is not None else NO_ACTIVE_MODEL,
        "embedding_model": embedding_model_summary(model),
    }


def suggestion_reason(value: float) -> str:
    """Why a frame pair is or is not suggested, in the words the workbench shows next to it (four decimals: the
    value the API gives, so that 0.79996 never reads "0.800 < 0.8")."""
    threshold, ceiling = settings.SIMILARITY_THRESHOLD, settings.NEAR_DUPLICATE_CEILING
    if value < threshold:
        return f"{value:.4f} < {threshold}: the frames differ too much to count as a subtle pair"
    if value >= ceiling:
        return f"{value:.4f} ≥ {ceiling}: nearly identical, nothing to ask about"
    return f"{value:.4f}: subtle (at least {threshold}, under the near-duplicate ceiling {ceiling})"


def video_suggestions(*, video: Video, limit: int = 20, below_limit: int = 5) -> dict:
    """Frame pairs of the video ranked for subtlety: threshold <= similarity < near-duplicate ceiling, within
    the maximum time gap, most similar first; beside them (`below_threshold`) the most similar pairs in the same
    window that fail the rule, so an annotator sees where the line runs and why. `counts`: every frame pair in
    the window, by verdict. Each entry carries its `reason`.

    Vectorised over a band: frames in time order, offset k compares every frame with the k-th next one in
    one numpy pass, for k up to the most frames any gap window holds (no Python loop over pairs).
    """
    model = embedding_model_active()
    fingerprint = model.fingerprint if model is not None else None
    counts = {"subtle": 0, "under_threshold": 0, "near_duplicate": 0}
    # `demo`: the numbers come from the untrained demo model, and the workbench says so beside them.
    empty = {"results": [], "below_threshold": [], "counts": counts, "demo": bool(model and model.demo)}
    if fingerprint is None:
        return {"status": "pending", **empty}
    frames = list(
        Frame.objects.filter(video=video)
        .order_by("timestamp", "index")
        .values_list("pk", "image_id", "index", "timestamp")
    )
    rows = list(
        ImageEmbedding.objects.filter(image__frame__video=video, fingerprint=fingerprint).values_list(
            "image_id", "vector"
        )
    )
    done = len(rows)
    embedded = [(image_id, vector) for image_id, vector in rows if vector is not None]
    status = "ready" if done >= len(frames) else "pending"
    if not embedded:
        return {"status": status, **empty}
    ids, matrix = stack_vectors(embedded)
    position = {image_id: row for row, image_id in enumerate(ids)}
    frames = [frame for frame in frames if frame[1] in position]
    vectors = matrix[[position[frame[1]] for frame in frames]]
    times = np.array([frame[3] for frame in frames], dtype=np.float64)
    count = len(frames)
    reach = np.searchsorted(times, times + settings.SUGGESTION_MAX_GAP_SECONDS, side="right") - np.arange(count) - 1
    width = int(reach.max()) if count else 0
    firsts, seconds, values = [], [], []
    for offset in range(1, width + 1):
        left = np.arange(count - offset)
        sims = cosines(vectors[: count - offset], vectors[offset:])
        keep = times[offset:] - times[: count - offset] <= settings.SUGGESTION_MAX_GAP_SECONDS
        firsts.append(left[keep])
        seconds.append(left[keep] + offset)
        values.append(sims[keep])
    if not firsts:
        return {"status": status, **empty}
    firsts, seconds, values = np.concatenate(firsts), np.concatenate(seconds), np.concatenate(values)
    gaps = times[seconds] - times[firsts]
    under = values < settings.SIMILARITY_THRESHOLD
    duplicate = values >= settings.NEAR_DUPLICATE_CEILING
    subtle = ~under & ~duplicate
    counts.update(subtle=int(subtle.sum()), under_threshold=int(under.sum()), near_duplicate=int(duplicate.sum()))

    def ranked(mask: np.ndarray, top: int) -> list[dict]:
        # A total order: most similar first (exact values, see `cosines`), then the shorter gap, then the earlier
        # frames, so equal similarities always come out the same way.
        chosen = np.flatnonzero(mask)
        order = chosen[np.lexsort((seconds[chosen], firsts[chosen], gaps[chosen], -values[chosen]))][:top]
        entries = []
        for at in order:
            one, two = frames[firsts[at]], frames[seconds[at]]
            entries.append(
                {
                    "frame_1": one[0],
                    "frame_2": two[0],
                    "image_1": one[1],
                    "image_2": two[1],
                    "index_1": one[2],
                    "index_2": two[2],
                    "similarity": round(float(values[at]), 4),
                    "gap": round(float(gaps[at]), 3),
                    "reason": suggestion_reason(float(values[at])),
                }
            )
        return entries

    return {
        "status": status,
        "results": ranked(subtle, limit),
        "below_threshold": ranked(under, below_limit),
        "counts": counts,
        "demo": empty["demo"],
    }


# --- Embedding jobs -------------------------------------------------------------------------------------------


def image_source(image: Image):
    """What the embedder reads: a local path when storage has one, else a callable that reads the bytes."""
    name = image.file.name
    try:
        return default_storage.path(name)
    except NotImplementedError:
        return lambda: default_storage.open(name, "rb").read()


def pending_images(*, video: Video | None = None, image_ids: Iterable[int] | None = None, retry_failed: bool = False):
    """Images with no embedding under the current model (and, with retry_failed, those that failed); every
    image while no model is active."""
    images = Image.objects.all()
    fingerprint = current_fingerprint()
    if fingerprint is not None:
        done = ImageEmbedding.objects.filter(fingerprint=fingerprint)
        if retry_failed:
            done = done.filter(vector__isnull=False)
        images = images.exclude(pk__in=done.values("image_id"))
    if video is not None:
        images = images.filter(frame__video=video)
    if image_ids is not None:
        images = images.filter(pk__in=list(image_ids))
    return images.order_by("pk")


def embedding_job_create(*, title: str, user=None) -> Job:
    return Job.objects.create(kind=Job.Kind.SIMILARITY, title=title, created_by=user)


# Images locked and embedded per transaction: a few batches, so the embedder keeps its decode-ahead pipeline full.
LOCK_BATCHES = 4


def embeddings_compute(
    *,
    job: Job,
    video: Video | None = None,
    image_ids: Iterable[int] | None = None,
    retry_failed: bool = False,
    embedder=None,
    run=None,
    progress=None,
) -> Job:
    """Embed the pending images in scope (a video's frames, some images, or all), a few batches at a time, then
    score the pairs that became computable. Each chunk commits on its own, so a crash loses at most one chunk and
    a re-run picks up where this one stopped (its progress goes on from what was counted: nothing twice).

    Workers never embed an image twice: each chunk's images are locked (FOR NO KEY UPDATE SKIP LOCKED) while they are
    embedded; images another worker holds are left to it, waited for at the end, and counted as done here.
    `run` (a claimed unit, annotator.jobs.services.JobRun) beats the heartbeat and stops a cancelled job.

    Without an active model, or when this worker's copy of it is not the active one (other weights, another
    device), the job fails with the reason (also in the worker log) and everything stays pending.
    """
    # The job row (through its claimed unit when a worker runs it) and, from `compute_embeddings --sync`, a
    # terminal's bar.
    progress = ProgressTee(run or job, progress)
    image_ids = list(image_ids) if image_ids is not None else None
    model = embedding_model_active(fresh=True)  # a model may have been activated a moment ago
    images = list(pending_images(video=video, image_ids=image_ids, retry_failed=retry_failed))
    job.refresh_from_db(fields=["done"])
    progress.start(total=job.done + len(images))  # a re-run after a crash goes on from what the first one counted
    fingerprint = model.fingerprint if model is not None else None
    problem = worker_model_problem(model)
    if problem:
        log.error("similarity job %s (%s): %s", job.pk, job.title, problem)
        job.finish(result={"model": fingerprint, "pending": len(images)}, error=problem)
        return job
    counts = {"embedded": 0, "failed": 0, "scored": 0, "by_others": 0}
    if images:
        try:
            embedder = embedder or worker_embedder(model)
        except Exception as error:  # the torch path reports every kind of broken folder its own way
            message = f"cannot load the DINOv3 model: {error}"
            log.error("similarity job %s (%s): %s", job.pk, job.title, message)
            job.finish(result={"model": fingerprint, "pending": len(images)}, error=message)
            return job
        chunk = max(1, getattr(embedder, "batch_size", 64)) * LOCK_BATCHES
        try:
            ids = [image.pk for image in images]
            deferred = []
            for at in range(0, len(ids), chunk):
                deferred += _embed_chunk(ids[at : at + chunk], fingerprint, embedder, progress, counts, wait=False)
            if deferred:  # held by another worker a moment ago: wait for it, embed what it left, count the rest
                _embed_chunk(deferred, fingerprint, embedder, progress, counts, wait=True)
        except (JobCancelled, OperationalError, InterfaceError):
            raise  # cancelled: the job says so already; the database away: the task retries and goes on
        except Exception as error:  # e.g. out of memory at batch 1: the job must not stay "running"
            if outage_of(error) is not None:
                raise  # the storage is away: the unit pauses and the job goes on when it is back (job_task_failed)
            log.exception("similarity job %s (%s) stopped", job.pk, job.title)
            job.finish(result={"model": fingerprint, "embedded": counts["embedded"]}, error=f"the run stopped: {error}")
            raise
    # Stale pairs whose images were embedded under this model earlier (e.g. after switching back) catch up too.
    scope = image_ids
    if video is not None:
        scope = list(Frame.objects.filter(video=video).values_list("image_id", flat=True))
    counts["scored"] += pairs_update_similarity(image_ids=scope)
    result = {
        "model": fingerprint,
        "embedded": counts["embedded"],
        "failed": counts["failed"],
        "pairs_scored": counts["scored"],
    }
    if counts["by_others"]:  # in scope, but embedded by another worker at the same time (counted once, here)
        result["embedded_by_other_workers"] = counts["by_others"]
    job.finish(result=result)
    if run is not None:
        run.complete()
    return job


def _embed_chunk(ids: list[int], fingerprint: str, embedder, progress, counts: dict, *, wait: bool) -> list[int]:
    """Lock the chunk's images still pending (skipping those another worker holds, unless `wait`), embed and store
    them in one transaction, and count the whole chunk once. Returns the ids left to another worker.

    The lock is FOR NO KEY UPDATE: it keeps a second embedder off these images, but never blocks a pair or any
    other row that only references them (their FOR KEY SHARE checks). Reads have a deadline (DINOV3_DECODE_TIMEOUT)
    and a pipe or device in place of a file is refused, so the transaction always ends."""
    with transaction.atomic():
        rows = Image.objects.filter(pk__in=ids).order_by("pk")
        rows = rows.select_for_update(no_key=True, skip_locked=not wait)
        locked = {image.pk: image for image in rows}
        done = set(
            ImageEmbedding.objects.filter(
                fingerprint=fingerprint, image_id__in=locked, vector__isnull=False
            ).values_list("image_id", flat=True)
        )
        mine = [locked[pk] for pk in ids if pk in locked and pk not in done]
        gone = [pk for pk in ids if pk in locked or wait]  # counted now: embedded here, or by another worker
        vectors, failures = {}, {}
        for batch in embedder.embed([image_source(image) for image in mine]) if mine else ():
            vectors.update({mine[i].pk: vector for i, vector in zip(batch.indices, batch.vectors, strict=True)})
            failures.update({mine[i].pk: message for i, message in batch.failures.items()})
        embeddings_store(fingerprint=fingerprint, vectors=vectors, failures=failures)
        counts["scored"] += pairs_update_similarity(image_ids=[*vectors])
    for pk, message in failures.items():
        log.warning("image %s (%s): %s", pk, locked[pk].file.name, message)
        progress.advance(1, error=f"image {pk} ({locked[pk].file.name}): {message}")
    _check_videos_of_missing_files(failures)
    counts["embedded"] += len(vectors)
    counts["failed"] += len(failures)
    counts["by_others"] += len(gone) - len(vectors) - len(failures)
    if len(gone) - len(failures):
        progress.advance(len(gone) - len(failures))
    return [pk for pk in ids if pk not in locked and not wait]


def _check_videos_of_missing_files(failures: dict[int, str]) -> None:
    """A frame whose file is gone marks its video `missing` (never leased; re-import or `repair` samples it again)."""
    gone = [pk for pk, message in failures.items() if "FileNotFoundError" in message or "No such file" in message]
    if not gone:
        return
    for video in Video.objects.filter(frames__image_id__in=gone, status=Video.Status.SAMPLED).distinct():
        missing = video.missing_files()
        if missing:
            with transaction.atomic():
                Video.objects.select_for_update().get(pk=video.pk).mark_missing(missing)
            log.error("video %s: %s frame file(s) missing from storage: marked missing", video.yt8m_id, len(missing))


EMBED_VIDEO_TASK = "annotator.tasks.embed_video_frames"


def video_queue_embeddings(*, video: Video, user=None) -> Job:
    """Queue the embedding of a video's frames on the similarity worker (call it once the video is sampled)."""
    with transaction.atomic():
        job = embedding_job_create(title=f"Similarity: embed the frames of {video.yt8m_id}", user=user)
        job_task_add(job=job, name=EMBED_VIDEO_TASK, kwargs={"job_id": job.pk, "video_id": video.pk})
    return job


def images_queue_embeddings(*, images: Iterable[Image], user=None) -> Job:
    """Queue the embedding of standalone images (e.g. an imported pair dataset) on the similarity worker."""
    ids = [image.pk for image in images]
    with transaction.atomic():
        job = embedding_job_create(title=f"Similarity: embed {len(ids)} images", user=user)
        job_task_add(job=job, name="annotator.tasks.embed_images", kwargs={"job_id": job.pk, "image_ids": ids})
    return job


def embeddings_queue_pending(*, user=None, retry_failed: bool = False) -> Job:
    """Queue a catch-up of every pending image and every pending or stale pair."""
    with transaction.atomic():
        job = embedding_job_create(title="Similarity: embed all pending images, rescore stale pairs", user=user)
        kwargs = {"job_id": job.pk, "retry_failed": retry_failed}
        job_task_add(job=job, name="annotator.tasks.embed_pending", kwargs=kwargs)
    return job


def embeddings_run(*, job_id: int, unit=None, video_id: int | None = None, **scope) -> Job | None:
    """What the embedding tasks call: claim the unit (a second delivery of a claimed or done unit does nothing),
    then embed its scope (`video_id`, `image_ids` or `retry_failed`)."""
    run = None
    if unit is not None and unit.unit_id is not None:
        run = job_task_claim(unit=unit)
        if run is None:
            return None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    if video_id is not None:
        video = Video.objects.filter(pk=video_id).first()
        if video is None:
            job.finish(error=f"Video {video_id} no longer exists.")
            if run is not None:
                run.complete()
            return job
        scope["video"] = video
    try:
        return embeddings_compute(job=job, run=run, **scope)
    except JobCancelled:
        if run is not None:
            run.cancel()
        return job


def scorable_pairs():
    """Pending or stale pairs whose two images are both embedded under the current model."""
    fingerprint = current_fingerprint()
    if fingerprint is None:
        return Pair.objects.none()
    embedded = ImageEmbedding.objects.filter(fingerprint=fingerprint, vector__isnull=False)
    image_ids = embedded.values("image_id")
    return Pair.objects.needing_similarity().filter(image_1_id__in=image_ids, image_2_id__in=image_ids)


def embeddings_catch_up() -> Job | None:
    """The periodic catch-up (on the similarity worker): when this worker can embed under the active model and
    work is waiting, run it as a job; else nothing, so no failed job piles up every few minutes."""
    problem = worker_model_problem(embedding_model_active(fresh=True))
    if problem is not None:
        log.warning("similarity catch-up skipped: %s", problem)
        return None
    if not pending_images().exists() and not scorable_pairs().exists():
        return None
    job = embedding_job_create(title="Similarity: catch up with pending images and stale pairs")
    return embeddings_compute(job=job)
