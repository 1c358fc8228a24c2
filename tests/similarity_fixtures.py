"""Similarity test helpers: stored embeddings for any test, and a tiny random DINOv3 saved like real weights.

`store_embedding(image, vector)` lets any test give images a similarity without torch; the `dinov3_dir`
fixture (torch) builds a tiny model with save_pretrained once per session and points the settings at it.
"""

from __future__ import annotations

import numpy as np
import pytest

from annotator.models import Image, ImageEmbedding
from annotator.similarity.services import current_fingerprint, vector_bytes
from demo.similarity import DEMO_CONFIG

# The BENCHMARK.md test model (layerscale 1.0, so a random model does not score every pair 1.0).
TINY_DINOV3 = DEMO_CONFIG


def store_embedding(image: Image, vector) -> ImageEmbedding:
    """Store `vector` (normalised here) as the image's embedding under the current model fingerprint."""
    vector = np.asarray(vector, dtype=np.float32)
    vector = vector / np.linalg.norm(vector)
    embedding, _ = ImageEmbedding.objects.update_or_create(
        image=image,
        fingerprint=current_fingerprint(),
        defaults={"vector": vector_bytes(vector), "dim": len(vector), "error": ""},
    )
    return embedding


def vector_with_similarity(base, value: float, seed: int = 0) -> np.ndarray:
    """A unit vector whose cosine similarity with the unit vector `base` is exactly `value`."""
    base = np.asarray(base, dtype=np.float64)
    base = base / np.linalg.norm(base)
    other = np.random.default_rng(seed).normal(size=base.shape)
    other -= other.dot(base) * base
    other /= np.linalg.norm(other)
    return value * base + np.sqrt(1 - value**2) * other


@pytest.fixture(scope="session")
def tiny_dinov3_dir(tmp_path_factory):
    """A tiny random DINOv3 saved with save_pretrained: loaded through the same path as real weights."""
    from annotator.similarity.embedder import build_random_model

    folder = tmp_path_factory.mktemp("dinov3-tiny")
    build_random_model(folder, seed=0, **TINY_DINOV3)
    return folder


@pytest.fixture
def dinov3(tiny_dinov3_dir, settings, tmp_path):
    """Settings pointing at the tiny model (CPU, small batches); no demo model can take its place."""
    settings.DINOV3_MODEL_DIR = str(tiny_dinov3_dir)
    settings.DINOV3_DEMO_MODEL_DIR = tmp_path / "no-demo-model"
    settings.DINOV3_DEVICE = "cpu"
    settings.DINOV3_BATCH_SIZE = 4
    settings.DINOV3_DECODE_THREADS = 2
    return tiny_dinov3_dir


@pytest.fixture
def no_dinov3(settings, tmp_path):
    """No model configured, and no demo model either."""
    settings.DINOV3_MODEL_DIR = ""
    settings.DINOV3_DEMO_MODEL_DIR = tmp_path / "no-demo-model"
    return None
