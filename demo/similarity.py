"""Demo similarity for `make run` / `seed_demo`: when no embedding model is active, a tiny random DINOv3 under
var/ is built and activated through the same service as real weights (`check_dinov3 --activate`), so the demo's
pairs carry (demo) similarities at once and the pages say they come from an untrained model."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from annotator.similarity.services import (
    DEMO_MARKER,
    embedding_job_create,
    embedding_model_activate,
    embedding_model_active,
    embeddings_compute,
    pending_images,
    scorable_pairs,
)

DEMO_CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    patch_size=16,
    image_size=64,
    num_register_tokens=4,
    layerscale_value=1.0,
)


def demo_model_folder() -> Path:
    return Path(settings.VAR_DIR) / "dinov3-demo"


def build_demo_model(folder: Path) -> Path:
    """A tiny random DINOv3 saved with save_pretrained, marked as an untrained demo model (banner, fingerprint)."""
    if (folder / DEMO_MARKER).exists():
        return folder
    from annotator.similarity.embedder import build_random_model

    build_random_model(folder, seed=0, **DEMO_CONFIG)
    (folder / DEMO_MARKER).write_text("A randomly initialised DINOv3 for the demo: its similarities mean nothing.\n")
    return folder


def seed_demo_similarity(stdout=None, *, folder: Path | None = None) -> None:
    """Activate the demo model unless a model is active, then embed every pending image in this process and
    score every pair (after the demo videos are sampled). This process is the worker here: the model runs on
    DINOV3_DEVICE, at DINOV3_IMAGE_SIZE."""
    model = embedding_model_active(fresh=True)
    if model is None:
        model = embedding_model_activate(
            folder=build_demo_model(folder or demo_model_folder()),
            device=settings.DINOV3_DEVICE,
            image_size=settings.DINOV3_IMAGE_SIZE,
            activated_by="seed_demo",
        )
    if not pending_images().exists() and not scorable_pairs().exists():
        return
    job = embeddings_compute(job=embedding_job_create(title="Demo: embed all images, score all pairs"))
    if stdout is not None:
        if job.errors:
            stdout.write(f"Similarity: {job.errors[-1]}")
        else:
            result = job.result
            stdout.write(
                f"Similarity: {result['embedded']} images embedded, {result['pairs_scored']} pairs scored "
                f"({model.folder}: {result['model']})."
            )
