"""Similarity test helpers: stored embeddings for any test, and tiny random DINOv3 models saved like real weights.

`store_embedding(image, vector)` lets any test give images a similarity without torch; `tiny_dinov3_dir`
(built with torch once, then kept in the pytest cache) is the model conftest activates for every test with the
database, through the same service as `check_dinov3 --activate`; `dinov3` gives the similarity worker's
settings (CPU, small batches); `no_dinov3` starts a test with no active model; `other_dinov3_dir` is a second
tiny model (other weights, so another fingerprint).
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from annotator.models import Image, ImageEmbedding
from annotator.similarity.services import current_fingerprint, vector_bytes
from demo.similarity import DEMO_CONFIG
from tests.disk_cache import cache_root, cached_folder

# The BENCHMARK.md test model (layerscale 1.0, so a random model does not score every pair 1.0), with
# transformers' default initialisation: the demo's wider one (demo.similarity) spreads the scores on purpose, and
# the tests' pairs are scored by this one.
TINY_DINOV3 = {name: value for name, value in DEMO_CONFIG.items() if name != "initializer_range"}


def store_embedding(image: Image, vector) -> ImageEmbedding:
    """Store `vector` (normalised here) as the image's embedding under the active model's fingerprint."""
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


def cached_random_model(cache_root: Path, *, seed: int) -> Path:
    """A tiny random DINOv3 saved under the pytest cache, built (with torch, which takes seconds of CPU to import)
    only if no earlier run built the same one: the folder name holds everything the weights depend on (config, seed,
    torch and transformers versions)."""
    recipe = json.dumps(
        {"config": TINY_DINOV3, "seed": seed, "torch": version("torch"), "transformers": version("transformers")},
        sort_keys=True,
    )

    def build(folder: Path) -> None:
        from annotator.similarity.embedder import build_random_model

        build_random_model(folder, seed=seed, **TINY_DINOV3)
        (folder / "recipe.json").write_text(recipe)

    return cached_folder(cache_root, f"dinov3-{hashlib.sha256(recipe.encode()).hexdigest()[:16]}", build)


@pytest.fixture(scope="session")
def tiny_dinov3_dir(request, tmp_path_factory):
    """A tiny random DINOv3 saved with save_pretrained: loaded through the same path as real weights."""
    return cached_random_model(cache_root(request, tmp_path_factory, "models"), seed=0)


@pytest.fixture(scope="session")
def other_dinov3_dir(request, tmp_path_factory):
    """A second tiny random DINOv3 (another seed): other weights, another fingerprint."""
    return cached_random_model(cache_root(request, tmp_path_factory, "models"), seed=1)


@pytest.fixture
def dinov3(tiny_dinov3_dir, active_embedding_model, settings):
    """The tiny model active (conftest) and the similarity worker's settings: CPU, small batches."""
    assert active_embedding_model is not None and active_embedding_model.folder == str(tiny_dinov3_dir.resolve())
    settings.DINOV3_DEVICE = "cpu"
    settings.DINOV3_BATCH_SIZE = 4
    settings.DINOV3_DECODE_THREADS = 2
    return tiny_dinov3_dir


@pytest.fixture
def no_dinov3(active_embedding_model):
    """No active embedding model (conftest skips its activation for the tests that ask for this)."""
    assert active_embedding_model is None
    return None
