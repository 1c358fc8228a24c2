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


def clustered_vectors(
    count: int, *, dim: int = 1024, seed: int = 0, singletons: float = 0.1, duplicates: float = 0.01
) -> tuple[np.ndarray, dict]:
    """`count` float16 unit vectors shaped like a real corpus, in id order: clusters (half "videos", whose frames
    drift from a start so that near frames are close and far ones less so, half "classes", whose images scatter
    around a centre), a share of `singletons` (random, nearly orthogonal to everything), and planted near-duplicates
    (a copy of an image with a little noise, similarity about 0.98 to 0.999, some above a 0.995 ceiling). Cluster
    sizes 4 to 53 and their spreads are drawn so that about ten pairs per image lie in [0.8, 0.995) (the shape of a
    corpus of video frames and class images; random vectors have none). Also returns what was made: cluster sizes
    and the planted duplicate pairs."""
    rng = np.random.default_rng(seed)
    halves = np.empty((count, dim), dtype=np.float16)

    def put(at: int, rows: np.ndarray) -> None:
        halves[at : at + len(rows)] = rows / np.linalg.norm(rows, axis=1, keepdims=True)

    n_dup = int(count * duplicates)
    n_single = int(count * singletons)
    clustered = count - n_dup - n_single
    at, sizes = 0, []
    while at < clustered:
        size = min(int(rng.integers(4, 54)), clustered - at)
        centre = rng.standard_normal(dim)
        centre /= np.linalg.norm(centre)
        if len(sizes) % 2 == 0:  # a video: a random walk from the first frame
            step = rng.uniform(0.08, 0.22)
            walk = np.cumsum(rng.standard_normal((size, dim)) * step / np.sqrt(dim), axis=0)
            put(at, centre + walk + rng.standard_normal((size, dim)) * 0.12 / np.sqrt(dim))
        else:  # a class: images around its centre
            spread = rng.uniform(0.3, 0.75)
            put(at, centre + rng.standard_normal((size, dim)) * spread / np.sqrt(dim))
        sizes.append(size)
        at += size
    for start in range(at, at + n_single, 8192):
        block = rng.standard_normal((min(8192, at + n_single - start), dim))
        put(start, block)
    at += n_single
    originals = rng.choice(at, size=n_dup, replace=False) if at else np.empty(0, np.int64)
    planted = []
    for offset, original in enumerate(originals.tolist()):
        noise = rng.uniform(0.02, 0.2)
        base = halves[original].astype(np.float64)
        put(at + offset, (base + rng.standard_normal(dim) * noise / np.sqrt(dim))[None])
        planted.append((original, at + offset))
    return halves, {"cluster_sizes": sizes, "duplicates": planted, "singletons": n_single}
