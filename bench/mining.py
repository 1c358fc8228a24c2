"""Corpus-wide pair mining on synthetic vectors: the method the app uses (int8 blocked products on CPU, bfloat16 on
CUDA, then exact integer scores) against plain exact numpy (float32 blocked products) and faiss HNSW (when faiss can
be imported; it is not a requirement), at 10,000 and 100,000 images of 1024-d float16, with planted near-pairs.

Each method runs in a child process of its own, so its peak memory (the child's maximum resident set, Python and
the 200 MB of vectors included) is its own. Printed per size and method: seconds of the mining call, peak memory,
the pairs found in [threshold, ceiling), and the recall of the exact pair set (plain numpy's, whose survivors are
scored exactly from the float16 values as integers, as the app scores every pair).

    python bench/mining.py                    # 10,000 and 100,000 images, 1,000 planted pairs each
    python bench/mining.py --sizes 10000 --methods chosen numpy
    python bench/mining.py --device cuda      # the chosen method on a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotator.similarity.exact import cosines, integer_vectors  # noqa: E402
from annotator.similarity.mining import candidate_pairs, exact_similarities, mine, unit_rows  # noqa: E402
from annotator.similarity.synthetic_vectors import planted_vectors  # noqa: E402

THRESHOLD, CEILING = 0.8, 0.995
NUMPY_BLOCK = 4096


def plain_numpy(halves: np.ndarray) -> set[tuple[int, int]]:
    """The baseline: float32 unit rows, the upper triangle in row blocks of float32 matrix products (numpy's BLAS),
    hits within 1e-3 of the range scored exactly (float32 products are off by about 1e-6)."""
    matrix = unit_rows(halves)
    count = len(matrix)
    firsts, seconds = [], []
    for top in range(0, count, NUMPY_BLOCK):
        scores = matrix[top : top + NUMPY_BLOCK] @ matrix[top:].T
        i, j = np.nonzero((scores >= THRESHOLD - 1e-3) & (scores < CEILING + 1e-3))
        i, j = i + top, j + top
        upper = j > i
        firsts.append(i[upper])
        seconds.append(j[upper])
    first, second = np.concatenate(firsts), np.concatenate(seconds)
    exact = exact_similarities(halves, first, second)
    inside = (exact >= THRESHOLD) & (exact < CEILING)
    return set(zip(first[inside].tolist(), second[inside].tolist(), strict=True))


def chosen(halves: np.ndarray, device: str) -> set[tuple[int, int]]:
    mined = mine(halves, np.arange(len(halves)), threshold=THRESHOLD, ceiling=CEILING, device=device)
    return set(zip(mined.first.tolist(), mined.second.tolist(), strict=True))


def faiss_hnsw(halves: np.ndarray) -> set[tuple[int, int]]:
    """faiss HNSW (M=32, efSearch=128), inner product: each image's 32 nearest, kept when exactly in range."""
    import faiss

    matrix = unit_rows(halves)
    index = faiss.IndexHNSWFlat(matrix.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efSearch = 128
    index.add(matrix)
    _, neighbours = index.search(matrix, 32)
    first = np.repeat(np.arange(len(matrix)), 32)
    second = neighbours.reshape(-1)
    keep = (second >= 0) & (second != first)
    first, second = np.minimum(first[keep], second[keep]), np.maximum(first[keep], second[keep])
    pairs = np.unique(np.stack([first, second], axis=1), axis=0)
    exact = cosines(integer_vectors(halves[pairs[:, 0]]), integer_vectors(halves[pairs[:, 1]]))
    inside = (exact >= THRESHOLD) & (exact < CEILING)
    return set(map(tuple, pairs[inside].tolist()))


def child(method: str, path: str, out: str, device: str) -> None:
    halves = np.load(path)
    if method == "chosen":  # torch's import and thread pool start before the clock, as in a warm worker
        candidate_pairs(halves[:2], low=THRESHOLD, high=CEILING, device=device)
    started = time.perf_counter()
    if method == "numpy":
        found = plain_numpy(halves)
    elif method == "chosen":
        found = chosen(halves, device)
    else:
        found = faiss_hnsw(halves)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    np.save(out, np.array(sorted(found), dtype=np.int64).reshape(-1, 2))
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb, "pairs": len(found)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--methods", nargs="+", default=["numpy", "chosen", "faiss"])
    parser.add_argument("--planted", type=int, default=1000, help="planted pairs (targets 0.7 to 1.0)")
    parser.add_argument("--device", default="cpu", help="the chosen method's device (cpu, cuda)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.device)
        return
    print(f"range [{THRESHOLD}, {CEILING}), 1024-d float16, {args.planted} planted pairs; device {args.device}")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            halves, planted = planted_vectors(size, pairs=min(args.planted, size // 2), seed=size)
            path = f"{folder}/vectors_{size}.npy"
            np.save(path, halves)
            del halves
            planted_in = sum(THRESHOLD <= s < CEILING for _, _, s in planted)
            print(f"\n{size:,} images ({planted_in} planted targets in range)")
            print(f"{'method':<8} {'seconds':>9} {'peak MB':>9} {'pairs':>7} {'recall':>8}")
            truth = None
            for method in args.methods:
                out = f"{folder}/{method}_{size}.npy"
                command = [sys.executable, __file__, "--device", args.device, "--child", method, path, out]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    last = (done.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"{method:<8} failed: {last}")
                    continue
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                found = set(map(tuple, np.load(out).tolist()))
                if truth is None and method == "numpy":
                    truth = found
                recall = f"{len(found & truth) / max(1, len(truth)):.4f}" if truth is not None else "-"
                print(
                    f"{method:<8} {figures['seconds']:>9.2f} {figures['peak_mb']:>9.0f} {figures['pairs']:>7} "
                    f"{recall:>8}  (load {os.getloadavg()[0]:.1f})"
                )


if __name__ == "__main__":
    main()
