"""Demo similarity for `make run` / `seed_demo`: when no embedding model is active, a tiny random DINOv3 under
var/ is built and activated through the same service as real weights (`check_dinov3 --activate`), so the demo's
pairs carry (demo) similarities at once and the pages say they come from an untrained model.

The random model is seeded and initialised wider than transformers' default (initializer_range 0.1, not 0.02):
with the default, the CLS token barely depends on the image and every pair scores 0.99 or more, which teaches
nothing about the 0.8 rule. With it, frames close in time score high and frames far apart (or under a changed
light) fall below 0.8, as they would with real weights; the numbers still mean nothing beyond that.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from annotator.models import Job, Pair, Video
from annotator.models.jobs import ACTIVE
from annotator.similarity.services import (
    DEMO_MARKER,
    current_fingerprint,
    embedding_job_create,
    embedding_model_activate,
    embedding_model_active,
    embeddings_compute,
    pending_images,
    scorable_pairs,
    video_suggestions,
    worker_model_folder,
    worker_model_problem,
)
from benchmark import jsonlimits
from subtlebench.errors import Conflict

DEMO_CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    patch_size=16,
    image_size=64,
    num_register_tokens=4,
    layerscale_value=1.0,
    initializer_range=0.1,
)


def demo_model_folder() -> Path:
    # A new name for the wider initialisation: an older var/ keeps its 0.99-for-everything demo model elsewhere.
    return Path(settings.VAR_DIR) / "dinov3-demo-seeded"


def build_demo_model(folder: Path) -> Path:
    """A tiny random DINOv3 saved with save_pretrained, marked as an untrained demo model (banner, fingerprint)."""
    if (folder / DEMO_MARKER).exists():
        return folder
    from annotator.similarity.embedder import build_random_model

    build_random_model(folder, seed=0, **DEMO_CONFIG)
    (folder / DEMO_MARKER).write_text(
        "A randomly initialised (seeded) DINOv3 for the demo: its similarities show the 0.8 rule at work, "
        "nothing more.\n"
    )
    return folder


DEMO_JOB_TITLE = "Demo: embed all images, score all pairs"


def demo_jobs_close_interrupted() -> int:
    """Fail the demo's embedding jobs that a killed seed_demo left running: they run in its process, with no unit
    for the sweeper to requeue, so nothing else would ever end them. What they stored stays; this run goes on."""
    interrupted = Job.objects.filter(
        kind=Job.Kind.SIMILARITY, title=DEMO_JOB_TITLE, status__in=ACTIVE, tasks__isnull=True
    ).order_by("pk")
    return sum(
        job.finish(result=job.result, error="interrupted: the seed_demo that ran it stopped; a later one went on")
        for job in interrupted
    )


def demo_model_outdated(model) -> bool:
    """An active demo model built before DEMO_CONFIG changed (the old one scored every pair 0.99): replace it."""
    if not model.demo:
        return False
    try:
        config = jsonlimits.loads((Path(model.folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # not readable here: leave it to the worker to say so
    return any(config.get(name) != value for name, value in DEMO_CONFIG.items())


class DemoModelUnusable(Conflict):
    """This process cannot embed with the model it would use: seed_demo stops before it makes any pair or release
    (with no similarity, no pair could be exported and the demo's v1 would be empty)."""


def seed_demo_similarity(stdout=None, *, folder: Path | None = None) -> None:
    """Activate the demo model unless a real model is active (an older demo model is replaced), then embed every
    pending image in this process and score every pair (after the demo videos are sampled). This process is the
    worker here: the model runs on DINOV3_DEVICE, at DINOV3_IMAGE_SIZE. DemoModelUnusable when this process cannot
    embed with it (a bad DINOV3_MODEL_DIR, weights that are not the active model's), naming the folder."""
    folder = Path(folder or demo_model_folder())
    model = embedding_model_active(fresh=True)
    if model is None or demo_model_outdated(model):
        model = embedding_model_activate(
            folder=build_demo_model(folder),
            device=settings.DINOV3_DEVICE,
            image_size=settings.DINOV3_IMAGE_SIZE,
            activated_by="seed_demo",
        )
    problem = worker_model_problem(model)
    if problem:
        where = (
            f"DINOV3_MODEL_DIR={settings.DINOV3_MODEL_DIR}"
            if settings.DINOV3_MODEL_DIR
            else f"the active model's folder {worker_model_folder(model)}"
        )
        raise DemoModelUnusable(
            f"seed_demo cannot embed the demo's images with {where}: {problem} Nothing was published. Fix that folder, "
            "or unset DINOV3_MODEL_DIR (the demo then builds a small random model of its own), and run seed_demo again."
        )
    demo_jobs_close_interrupted()
    if not pending_images().exists() and not scorable_pairs().exists():
        return
    job = embeddings_compute(job=embedding_job_create(title=DEMO_JOB_TITLE))
    if stdout is not None:
        if job.errors:
            stdout.write(f"Similarity: {job.errors[-1]}")
        else:
            stdout.write(f"Similarity: {job.result['embedded']} images embedded ({model.fingerprint}).")


def demo_similarity_counts() -> dict:
    """What the demo's similarities look like under the active model: its scored pairs under and at or over the
    threshold, and every frame pair within the suggestion window of each sampled video, by verdict."""
    threshold = settings.SIMILARITY_THRESHOLD
    fingerprint = current_fingerprint()
    scored = Pair.objects.filter(similarity_model=fingerprint, similarity__isnull=False) if fingerprint else None
    counts = {
        "pairs_under": scored.filter(similarity__lt=threshold).count() if scored is not None else 0,
        "pairs_over": scored.filter(similarity__gte=threshold).count() if scored is not None else 0,
        "frame_pairs": {"subtle": 0, "under_threshold": 0, "near_duplicate": 0},
    }
    for video in Video.objects.filter(status=Video.Status.SAMPLED).order_by("pk"):
        for verdict, number in video_suggestions(video=video, limit=0, below_limit=0)["counts"].items():
            counts["frame_pairs"][verdict] += number
    return counts


def report_demo_similarity(stdout) -> None:
    """One true line on the demo's pair scores (counted from the pairs, after they are made and scored)."""
    model = embedding_model_active()
    if model is None:
        stdout.write("Similarity: no embedding model is active; every pair is pending.")
        return
    counts = demo_similarity_counts()
    frames = counts["frame_pairs"]
    threshold = settings.SIMILARITY_THRESHOLD
    demo = " (demo model: the numbers show the rule at work, they are not DINOv3 similarities)" if model.demo else ""
    stdout.write(
        f"Similarity{demo}: {counts['pairs_under'] + counts['pairs_over']} pairs scored, "
        f"{counts['pairs_under']} under {threshold} and {counts['pairs_over']} at or over it; frame pairs within "
        f"{settings.SUGGESTION_MAX_GAP_SECONDS:g} s: {frames['subtle']} subtle, {frames['under_threshold']} under "
        f"{threshold}, {frames['near_duplicate']} near-duplicate."
    )
