"""Synthetic float16 unit vectors with planted near-pairs at known similarities: what the mining tests and
bench/mining.py measure recall and exactness on. Random unit vectors in 1024 dimensions are nearly orthogonal
(cosines about N(0, 1/32)), so the pairs in a range such as [0.8, 0.995) are the planted ones and nothing else."""

from __future__ import annotations

import numpy as np


def planted_vectors(
    count: int, *, dim: int = 1024, pairs: int = 100, low: float = 0.7, high: float = 1.0, seed: int = 0
) -> tuple[np.ndarray, list[tuple[int, int, float]]]:
    """`count` float16 unit vectors (rows) and `pairs` planted pairs (i, j, target similarity), i < j, each image in
    at most one planted pair, targets evenly spread over [low, high)."""
    rng = np.random.default_rng(seed)
    halves = np.empty((count, dim), dtype=np.float16)
    for at in range(0, count, 8192):  # in chunks: 100,000 x 1024 float64 would be 800 MB at once
        block = rng.standard_normal((min(8192, count - at), dim))
        halves[at : at + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    chosen = rng.choice(count, size=2 * pairs, replace=False)
    targets = low + (high - low) * (np.arange(pairs) + 0.5) / pairs
    planted = []
    for p in range(pairs):
        i, j = sorted(int(x) for x in chosen[2 * p : 2 * p + 2])
        a = halves[i].astype(np.float64)
        a /= np.linalg.norm(a)
        noise = rng.standard_normal(dim)
        noise -= noise.dot(a) * a
        noise /= np.linalg.norm(noise)
        s = float(targets[p])
        halves[j] = s * a + np.sqrt(max(0.0, 1 - s * s)) * noise
        planted.append((i, j, s))
    return halves, planted
