"""Demo similarity for `make run` / `seed_demo`: a tiny random DINOv3 under var/ when no real weights are set,
used through the same code path as real weights, so the demo's pairs carry (demo) similarities at once."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from annotator.similarity.services import (
    DEMO_MARKER,
    embedding_job_create,
    embeddings_compute,
    model_dir,
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


def build_demo_model(folder: Path) -> Path:
    """A tiny random DINOv3 saved with save_pretrained, marked as an untrained demo model (banner, fingerprint)."""
    if (folder / DEMO_MARKER).exists():
        return folder
    from annotator.similarity.embedder import build_random_model

    build_random_model(folder, seed=0, **DEMO_CONFIG)
    (folder / DEMO_MARKER).write_text("A randomly initialised DINOv3 for the demo: its similarities mean nothing.\n")
    return folder


def seed_demo_similarity(stdout=None) -> None:
    """Embed every pending image in this process and score every pair (after the demo videos are sampled)."""
    if not settings.DINOV3_MODEL_DIR:
        build_demo_model(Path(settings.DINOV3_DEMO_MODEL_DIR))
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
                f"({model_dir()}: {result['model']})."
            )
