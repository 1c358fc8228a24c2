"""Corpus-wide pair mining on real-shaped synthetic vectors: the method the app uses (int8 blocked products on CPU,
bfloat16 on CUDA, then exact integer scores) against plain exact numpy (float32 blocked products) on the same
vectors, and faiss HNSW when faiss can be imported (it is not a requirement), at 10,000 and 100,000 images of
1024-d float16. Then the plan of a job spread over workers in block pairs, from the measured cost of one unit.

The data (`--data clustered`, the default; annotator/similarity/synthetic_vectors.py): clusters of frames of one
video and images of one class, planted near-duplicates and singletons, about ten pairs per image in
[0.8, 0.995) (about a million at 100,000 images). `--data planted`: random vectors with planted pairs, where almost
nothing is in range (it flatters every method).

Each method runs in a child process of its own, so its figures are its own: CPU seconds of the mining call (user and
system, all threads), peak memory (the child's maximum RSS, Python and the 200 MB of vectors included), the RSS
before the call and after it once the run's memory is given back, the pairs found in [threshold, ceiling), and the
recall of the exact pair set (plain numpy's, whose survivors are scored exactly as the app scores every pair).

    python bench/mining.py                    # 10,000 and 100,000 images, then the plan of 1,000,000
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

from annotator.similarity.mining import (  # noqa: E402
    MiningFilters,
    candidate_pairs,
    exact_similarities,
    in_range_pairs,
    mine,
    release_memory,
    unit_rows,
    with_default_groups,
)
from annotator.similarity.synthetic_vectors import clustered_vectors, planted_vectors  # noqa: E402

THRESHOLD, CEILING = 0.8, 0.995
NUMPY_BLOCK = 4096
PAIR_BYTES = 24  # a survivor stored by a unit: two int64 image ids and a float64 similarity


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
    """faiss HNSW (M=32, efSearch=128), inner product: each image's 32 nearest, kept when exactly in range (scored
    in chunks, as the app scores survivors)."""
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
    exact = exact_similarities(halves, pairs[:, 0], pairs[:, 1])
    inside = (exact >= THRESHOLD) & (exact < CEILING)
    return set(map(tuple, pairs[inside].tolist()))


def block_units(halves: np.ndarray, block: int, device: str) -> dict:
    """The cost of one unit of a spread job: a block's own upper triangle, and a block against the next one."""
    figures = {}
    groups = with_default_groups(None, 2 * block)
    for name, rows, end in (("diagonal", halves[:block], None), ("pair", halves[: 2 * block], block)):
        part = {key: values[: len(rows)] for key, values in groups.items()}
        started = cpu_seconds()
        first, *_ = in_range_pairs(
            rows,
            threshold=THRESHOLD,
            ceiling=CEILING,
            filters=MiningFilters(),
            groups=part,
            rows_end=end,
            device=device,
        )
        figures[name] = {"cpu": cpu_seconds() - started, "survivors": len(first)}
    return figures


def child(method: str, path: str, out: str, device: str, block: int) -> None:
    halves = np.load(path)
    if method in ("chosen", "block"):  # torch's import and thread pool start before the clock, as in a warm worker
        candidate_pairs(halves[:2], low=THRESHOLD, high=CEILING, device=device)
    if method == "block":
        print(json.dumps(block_units(halves, block, device)))
        return
    release_memory()
    before = rss_mb()
    started, wall = cpu_seconds(), time.perf_counter()
    if method == "numpy":
        found = plain_numpy(halves)
    elif method == "chosen":
        found = chosen(halves, device)
    else:
        found = faiss_hnsw(halves)
    cpu, wall = cpu_seconds() - started, time.perf_counter() - wall
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    np.save(out, np.array(sorted(found), dtype=np.int64).reshape(-1, 2))
    pairs = len(found)
    del found
    release_memory()
    figures = {"cpu": cpu, "seconds": wall, "peak_mb": peak_mb, "before_mb": before, "after_mb": rss_mb()}
    print(json.dumps({**figures, "pairs": pairs}))


def run_child(args, method: str, path: str, out: str, block: int = 0) -> dict | str:
    command = [sys.executable, __file__, "--device", args.device, "--child", method, path, out, str(block)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["?"])[-1]
    return json.loads(done.stdout.strip().splitlines()[-1])


def plan(images: int, block: int, dim: int, cost: dict, workers: int) -> None:
    """A job of `images` cut into block pairs, from the measured cost of one diagonal and one off-diagonal unit."""
    blocks = -(-images // block)
    diagonal, pairs = blocks, blocks * (blocks - 1) // 2
    vector_bytes = block * dim * 2
    read = diagonal * vector_bytes + pairs * 2 * vector_bytes
    survivors = diagonal * cost["diagonal"]["survivors"] + pairs * cost["pair"]["survivors"]
    cpu = diagonal * cost["diagonal"]["cpu"] + pairs * cost["pair"]["cpu"]
    print(
        f"\nplan of {images:,} images in blocks of {block:,}: {blocks} blocks, {diagonal + pairs:,} units "
        f"({diagonal} diagonal, {pairs:,} block pairs) and one merge"
    )
    print(
        f"  CPU per unit (measured): diagonal {cost['diagonal']['cpu']:.1f} s, block pair {cost['pair']['cpu']:.1f} s;"
        f" survivors per unit {cost['diagonal']['survivors']:,} / {cost['pair']['survivors']:,}"
    )
    print(
        f"  bytes moved: vectors read by the units {read / 1e9:.1f} GB ({vector_bytes / 2**20:.0f} MiB a block), "
        f"survivors stored and read by the merge {survivors * PAIR_BYTES / 1e6:.0f} MB ({survivors:,} pairs)"
    )
    print(
        f"  CPU in all {cpu / 3600:.2f} h; on {workers} workers of this machine's speed about "
        f"{cpu / workers / 60:.0f} min of wall time (units are independent)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--methods", nargs="+", default=["numpy", "chosen", "faiss"])
    parser.add_argument("--data", choices=["clustered", "planted"], default="clustered")
    parser.add_argument("--planted", type=int, default=1000, help="--data planted: planted pairs (targets 0.7 to 1.0)")
    parser.add_argument("--device", default="cpu", help="the chosen method's device (cpu, cuda)")
    parser.add_argument("--block", type=int, default=50_000, help="rows per block of the plan (MINING_BLOCK_ROWS)")
    parser.add_argument("--plan-images", type=int, default=1_000_000, help="0: no plan")
    parser.add_argument("--plan-workers", type=int, default=8)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, path, out, block = args.child
        child(method, path, out, args.device, int(block))
        return
    try:
        import faiss  # noqa: F401
    except ImportError:
        if "faiss" in args.methods:
            print("faiss is not installed: its rows are left out")
        args.methods = [m for m in args.methods if m != "faiss"]
    print(f"range [{THRESHOLD}, {CEILING}), 1024-d float16, {args.data} data; device {args.device}")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            if args.data == "clustered":
                halves, info = clustered_vectors(size, seed=size)
                shape = (
                    f"{len(info['cluster_sizes'])} clusters, {len(info['duplicates'])} planted near-duplicates, "
                    f"{info['singletons']} singletons"
                )
            else:
                halves, planted = planted_vectors(size, pairs=min(args.planted, size // 2), seed=size)
                shape = f"{sum(THRESHOLD <= s < CEILING for _, _, s in planted)} planted targets in range"
            path = f"{folder}/vectors_{size}.npy"
            np.save(path, halves)
            del halves
            print(f"\n{size:,} images ({shape})")
            print(
                f"{'method':<8} {'CPU-s':>8} {'wall s':>8} {'peak MB':>8} {'RSS before':>11} {'after':>6} "
                f"{'pairs':>9} {'recall':>8}"
            )
            truth = None
            for method in args.methods:
                out = f"{folder}/{method}_{size}.npy"
                figures = run_child(args, method, path, out)
                if isinstance(figures, str):
                    print(f"{method:<8} failed: {figures}")
                    continue
                found = set(map(tuple, np.load(out).tolist()))
                if truth is None and method == "numpy":
                    truth = found
                recall = f"{len(found & truth) / max(1, len(truth)):.5f}" if truth is not None else "-"
                print(
                    f"{method:<8} {figures['cpu']:>8.1f} {figures['seconds']:>8.1f} {figures['peak_mb']:>8.0f} "
                    f"{figures['before_mb']:>11.0f} {figures['after_mb']:>6.0f} {figures['pairs']:>9,} {recall:>8}"
                    f"  (load {os.getloadavg()[0]:.1f})"
                )
        if args.plan_images:
            size = max(args.sizes)
            block = min(args.block, size // 2)
            cost = run_child(args, "block", f"{folder}/vectors_{size}.npy", "-", block)
            if isinstance(cost, str):
                print(f"plan: the unit's measurement failed: {cost}")
            else:
                plan(args.plan_images, block, 1024, cost, args.plan_workers)


if __name__ == "__main__":
    main()
