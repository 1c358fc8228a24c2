"""Corpus-wide pair mining on real-shaped synthetic vectors: the method the app uses (int8 blocked products on CPU,
skipping the tiles that coarse groups' angle bounds rule out, bfloat16 on CUDA, then exact integer scores) against
plain exact numpy (float32 blocked products) on the same vectors, and faiss's own anchors on the same vectors
(faiss-cpu, a dev requirement; its rows are left out where it cannot be imported): Flat range search (exact),
IVF-Flat (nprobe 16) and HNSW (at 10,000 images only: its build grows faster than linearly), at 10,000 and 100,000
images of 1024-d float16. Then the plan of a job spread over workers in block pairs, from the measured cost of one
unit.

The data (`--data clustered`, the default; annotator/similarity/synthetic_vectors.py): clusters of frames of one
video and images of one class, planted near-duplicates and singletons, about ten pairs per image in
[0.8, 0.995) (about a million at 100,000 images). `--data planted`: random vectors with planted pairs, where almost
nothing is in range (it flatters every method).

Each method runs in a child process of its own, so its figures are its own: CPU seconds of the mining call (user and
system, all threads), peak memory (the child's maximum RSS, Python and the 200 MB of vectors included), the RSS
before the call and after it once the run's memory is given back, the pairs found in [threshold, ceiling), and the
recall of the exact pair set (plain numpy's, whose survivors are scored exactly as the app scores every pair). Every
method's float32 (or int8) scores only nominate pairs; each nominated pair is then scored exactly, as the app does,
so a method's recall says which in-range pairs its index missed, and none is counted that is not in range.

    python bench/mining.py                    # 10,000 and 100,000 images, then the plan of 1,000,000
    python bench/mining.py --sizes 10000 --methods chosen numpy flat ivf hnsw
    python bench/mining.py --device cuda      # the chosen method on a GPU
    python bench/mining.py --sizes 10000 --plan-images 0 --job 200000 --job-workers 2   # under localservices

`--job N` also runs the mining job itself through the database (a database of its own, N clustered images): on one
worker process (CPU, peak RSS, and RSS before and after the job), then the same job cut into block pairs of
`--job-block` rows and taken by `--job-workers` worker processes (each calls the task's service on the units it
claims, as a Celery worker would), and says whether the candidates are the same to the last bit.
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
FLOAT_SLACK = 1e-3  # float32 scores are off by about 1e-6: pairs this close to the range are nominated, then scored
FAISS_METHODS = ("flat", "ivf", "hnsw")
IVF_PROBES = 16
HNSW_NEIGHBOURS, HNSW_SEARCH = 32, 128
JOB_FINGERPRINT = "bench-mining"
PAIR_BYTES = 24  # a survivor stored by a unit: two int64 image ids and a float64 similarity


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def in_range(halves: np.ndarray, first: np.ndarray, second: np.ndarray) -> set[tuple[int, int]]:
    """Of nominated pairs (rows, either order, repeats allowed, no pair of a row with itself), those whose exact
    similarity (the app's, from the float16 values as integers, in chunks) lies in [threshold, ceiling)."""
    count = len(halves)
    keys = np.unique(np.minimum(first, second) * count + np.maximum(first, second))
    first, second = keys // count, keys % count
    del keys
    exact = exact_similarities(halves, first, second)
    inside = (exact >= THRESHOLD) & (exact < CEILING)
    return set(zip(first[inside].tolist(), second[inside].tolist(), strict=True))


def plain_numpy(halves: np.ndarray) -> set[tuple[int, int]]:
    """The baseline: float32 unit rows, the upper triangle in row blocks of float32 matrix products (numpy's BLAS),
    hits within FLOAT_SLACK of the range scored exactly."""
    matrix = unit_rows(halves)
    count = len(matrix)
    firsts, seconds = [], []
    for top in range(0, count, NUMPY_BLOCK):
        scores = matrix[top : top + NUMPY_BLOCK] @ matrix[top:].T
        i, j = np.nonzero((scores >= THRESHOLD - FLOAT_SLACK) & (scores < CEILING + FLOAT_SLACK))
        i, j = i + top, j + top
        upper = j > i
        firsts.append(i[upper])
        seconds.append(j[upper])
    del matrix, scores
    return in_range(halves, np.concatenate(firsts), np.concatenate(seconds))


def chosen(halves: np.ndarray, device: str) -> set[tuple[int, int]]:
    mined = mine(halves, np.arange(len(halves)), threshold=THRESHOLD, ceiling=CEILING, device=device)
    return set(zip(mined.first.tolist(), mined.second.tolist(), strict=True))


def faiss_filled(index, halves: np.ndarray):
    """`index` with every row added as a float32 unit vector, NUMPY_BLOCK rows at a time (no float32 copy of the whole
    matrix beside the index's own)."""
    for at in range(0, len(halves), NUMPY_BLOCK):
        index.add(unit_rows(halves[at : at + NUMPY_BLOCK]))
    return index


def faiss_ranged(index, halves: np.ndarray) -> set[tuple[int, int]]:
    """faiss range search of every row against the index (queries NUMPY_BLOCK rows at a time): the pairs it scores
    above threshold - FLOAT_SLACK and below ceiling + FLOAT_SLACK, both directions, then scored exactly. faiss's range
    search has no upper triangle: each pair is scored from both ends."""
    firsts, seconds = [], []
    for at in range(0, len(halves), NUMPY_BLOCK):
        limits, scores, labels = index.range_search(unit_rows(halves[at : at + NUMPY_BLOCK]), THRESHOLD - FLOAT_SLACK)
        rows = np.repeat(np.arange(at, at + len(limits) - 1), np.diff(limits.astype(np.int64)))
        keep = (scores < CEILING + FLOAT_SLACK) & (labels != rows) & (labels >= 0)
        firsts.append(rows[keep])
        seconds.append(labels[keep].astype(np.int64))
    return in_range(halves, np.concatenate(firsts), np.concatenate(seconds))


def faiss_flat(halves: np.ndarray) -> set[tuple[int, int]]:
    """faiss IndexFlatIP's range search: exact float32 inner products, every pair, as faiss offers it."""
    import faiss

    return faiss_ranged(faiss_filled(faiss.IndexFlatIP(halves.shape[1]), halves), halves)


def ivf_lists(count: int) -> int:
    """IVF's number of lists: 4 sqrt(N), the low end of faiss's guidance (1,265 at 100,000 images)."""
    return max(1, round(4 * count**0.5))


def faiss_ivf(halves: np.ndarray) -> set[tuple[int, int]]:
    """faiss IVF-Flat, inner product: ivf_lists(N) k-means lists trained on every row (faiss's defaults: 25
    iterations, at most 256 points a list), IVF_PROBES lists searched per query, range search. Not exact: a pair
    whose second image lies in a list the query does not probe is missed (the recall column)."""
    import faiss

    dim = halves.shape[1]
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, ivf_lists(len(halves)), faiss.METRIC_INNER_PRODUCT)
    training = unit_rows(halves)
    index.train(training)
    del training
    index.nprobe = IVF_PROBES
    return faiss_ranged(faiss_filled(index, halves), halves)


def faiss_hnsw(halves: np.ndarray) -> set[tuple[int, int]]:
    """faiss HNSW (M 32, efSearch 128), inner product: each image's 32 nearest (NUMPY_BLOCK queries at a time),
    nominated when within FLOAT_SLACK of the range, then scored exactly. Its build grows faster than linearly."""
    import faiss

    dim = halves.shape[1]
    index = faiss.IndexHNSWFlat(dim, HNSW_NEIGHBOURS, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efSearch = HNSW_SEARCH
    faiss_filled(index, halves)
    firsts, seconds = [], []
    for at in range(0, len(halves), NUMPY_BLOCK):
        scores, neighbours = index.search(unit_rows(halves[at : at + NUMPY_BLOCK]), HNSW_NEIGHBOURS)
        rows = np.repeat(np.arange(at, at + len(neighbours)), HNSW_NEIGHBOURS)
        scores, neighbours = scores.reshape(-1), neighbours.reshape(-1)
        keep = (neighbours >= 0) & (neighbours != rows)
        keep &= (scores >= THRESHOLD - FLOAT_SLACK) & (scores < CEILING + FLOAT_SLACK)
        firsts.append(rows[keep])
        seconds.append(neighbours[keep].astype(np.int64))
    del index
    return in_range(halves, np.concatenate(firsts), np.concatenate(seconds))


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
    if method == "chosen":
        found = chosen(halves, device)
    else:
        found = {"numpy": plain_numpy, "flat": faiss_flat, "ivf": faiss_ivf, "hnsw": faiss_hnsw}[method](halves)
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


# --- The job itself, through the database: one worker, then the same job spread over worker processes ----------


def job_setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")
    import django

    django.setup()


def job_seed(images: int) -> None:
    """A collection of `images` clustered vectors (bulk rows, no files) under an active model."""
    job_setup()
    from annotator.models import Collection, Domain, EmbeddingModel, Image, ImageEmbedding

    EmbeddingModel.objects.create(
        fingerprint=JOB_FINGERPRINT, dim=1024, layers=1, dtype="fp32", image_size=224, folder="/bench", active=True
    )
    collection = Collection.objects.create(name="bench", domain=Domain.NATURAL, layout="plain", location="/bench")
    halves, _ = clustered_vectors(images, seed=images)
    for at in range(0, images, 10_000):
        rows = Image.objects.bulk_create(
            Image(file=f"bench/{n}.jpg", width=64, height=64, source="bench", collection=collection)
            for n in range(at, min(at + 10_000, images))
        )
        ImageEmbedding.objects.bulk_create(
            ImageEmbedding(image=row, fingerprint=JOB_FINGERPRINT, vector=halves[at + n].tobytes(), dim=1024)
            for n, row in enumerate(rows)
        )
    print(json.dumps({"collection": collection.pk}))


def job_single(collection: int, out: str) -> None:
    """The job on one worker (this process, warm): CPU, peak RSS, RSS before and after; its candidates saved to
    `out` and removed (the spread job would leave them out as candidates already)."""
    job_setup()
    from annotator.jobs.services import UnitRef
    from annotator.mining.services import mining_run, mining_start
    from annotator.models import PairCandidate

    candidate_pairs(np.eye(2, 8, dtype=np.float16), low=THRESHOLD, high=CEILING)  # torch warm, as in a worker
    release_memory()
    before = rss_mb()
    job = mining_start(user=None, scope=str(collection), k=2)
    started, wall = cpu_seconds(), time.perf_counter()
    mining_run(job_id=job.pk, unit=UnitRef(job.tasks.get().pk, celery_id="single"))
    cpu, wall = cpu_seconds() - started, time.perf_counter() - wall
    figures = {"cpu": cpu, "seconds": wall, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    figures.update(before_mb=before, after_mb=rss_mb())  # the job has ended: what the worker keeps
    job.refresh_from_db()
    rows = PairCandidate.objects.filter(job=job).values_list("image_1_id", "image_2_id", "similarity")
    np.save(out, np.array(sorted(rows), dtype=np.float64).reshape(-1, 3))
    PairCandidate.objects.filter(job=job).delete()
    print(json.dumps({**figures, "status": job.status, **job.result}))


def job_start(collection: int) -> None:
    job_setup()
    from annotator.mining.services import mining_start

    print(json.dumps({"job": mining_start(user=None, scope=str(collection), k=2).pk}))


def job_worker(job_id: int) -> None:
    """A worker process: take waiting units of the job (a claim another worker won is passed over) until it ends;
    the CPU of each unit and this process's peak RSS."""
    job_setup()
    from annotator.jobs.services import UnitRef
    from annotator.mining.services import mining_run
    from annotator.models import Job, JobTask

    candidate_pairs(np.eye(2, 8, dtype=np.float16), low=THRESHOLD, high=CEILING)
    release_memory()
    before, units = rss_mb(), []
    waiting = (JobTask.Status.PENDING, JobTask.Status.QUEUED)
    while Job.objects.filter(pk=job_id, status__in=(Job.Status.QUEUED, Job.Status.RUNNING)).exists():
        unit = JobTask.objects.filter(job_id=job_id, status__in=waiting).order_by("?").first()
        if unit is None:
            time.sleep(0.2)  # the others' last units, or the merge, still run
            continue
        part = {name: unit.kwargs[name] for name in ("block", "merge") if name in unit.kwargs}
        started = cpu_seconds()
        if mining_run(job_id=job_id, unit=UnitRef(unit.pk, celery_id=f"{os.getpid()}-{unit.pk}"), **part) is None:
            continue  # another worker claimed it first
        kind = (
            "merge"
            if "merge" in part
            else "plan"
            if not part
            else "block"
            if part["block"][0] == part["block"][1]
            else "pair"
        )
        units.append((kind, cpu_seconds() - started, rss_mb()))  # the RSS once the unit has given its memory back
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    release_memory()
    print(json.dumps({"units": units, "peak_mb": peak, "before_mb": before, "after_mb": rss_mb()}))


def job_compare(job_id: int, single: str) -> None:
    job_setup()
    from annotator.models import Job, PairCandidate

    job = Job.objects.get(pk=job_id)
    rows = PairCandidate.objects.filter(job=job).values_list("image_1_id", "image_2_id", "similarity")
    spread = np.array(sorted(rows), dtype=np.float64).reshape(-1, 3)
    same = spread.tobytes() == np.load(single).tobytes()
    print(json.dumps({"status": job.status, "identical": same, "candidates": len(spread), **job.result}))


def job_bench(args) -> None:
    """Seed a database of its own, run the job on one worker, then spread over `--job-workers` processes."""
    from bench.lease_load import bench_database_url, recreate_database

    url = bench_database_url(args.job_database)
    env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "subtlebench.settings"}
    # As in production: with DEBUG on, Django keeps the text of every query (a unit's pairs, rendered) in memory.
    env.update(DEBUG="False", SECRET_KEY="bench-mining-not-a-secret", ALLOWED_HOSTS="127.0.0.1")
    recreate_database(url)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)

    def step(*words, rows: int | None = None, background: bool = False):
        command = [sys.executable, __file__, "--job-child", *map(str, words)]
        extra = {"MINING_BLOCK_ROWS": str(rows)} if rows else {}
        process = subprocess.Popen(command, env={**env, **extra}, stdout=subprocess.PIPE, text=True)
        return process if background else answer(process)

    def answer(process) -> dict:
        out, _ = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"a step of the job bench failed ({process.args[3:]})")
        return json.loads(out.strip().splitlines()[-1])

    images = args.job
    collection = step("seed", images)["collection"]
    with tempfile.TemporaryDirectory() as folder:
        single = step("single", collection, f"{folder}/single.npy", rows=images + 1)
        print(
            f"\nthe mining job through the database, {images:,} clustered images, k 2 (load {os.getloadavg()[0]:.1f})"
        )
        print(
            f"one worker:  {single['cpu']:.1f} CPU-s, {single['seconds']:.1f} s, peak {single['peak_mb']:.0f} MB, "
            f"RSS {single['before_mb']:.0f} MB before and {single['after_mb']:.0f} MB after the job; "
            f"{single['in_range']:,} pairs in range, {single['candidates']:,} candidates"
        )
        job = step("start", collection)["job"]
        started = time.perf_counter()
        workers = [step("worker", job, rows=args.job_block, background=True) for _ in range(args.job_workers)]
        reports = [answer(worker) for worker in workers]
        wall = time.perf_counter() - started
        compared = step("compare", job, f"{folder}/single.npy")
        print(
            f"{args.job_workers} workers, blocks of {args.job_block:,}: {compared['units']} block-pair units and a "
            f"merge in {wall:.1f} s; the same candidates as one worker: {compared['identical']}"
        )
        for at, report in enumerate(reports):
            kinds: dict = {}
            for kind, cpu, _ in report["units"]:
                kinds.setdefault(kind, []).append(cpu)
            spent = ", ".join(f"{len(v)} {k} ({sum(v):.1f} CPU-s, {max(v):.1f} at most)" for k, v in kinds.items())
            print(
                f"  worker {at + 1}: {spent}; peak {report['peak_mb']:.0f} MB, RSS {report['before_mb']:.0f} MB "
                f"idle, {report['after_mb']:.0f} MB after the job"
            )
            print("    RSS after each unit: " + ", ".join(f"{kind} {rss:.0f}" for kind, _, rss in report["units"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--methods", nargs="+", default=["numpy", "chosen", *FAISS_METHODS])
    parser.add_argument("--hnsw-up-to", type=int, default=10_000, help="hnsw at sizes up to this many images only")
    parser.add_argument("--data", choices=["clustered", "planted"], default="clustered")
    parser.add_argument("--planted", type=int, default=1000, help="--data planted: planted pairs (targets 0.7 to 1.0)")
    parser.add_argument("--device", default="cpu", help="the chosen method's device (cpu, cuda)")
    parser.add_argument("--block", type=int, default=50_000, help="rows per block of the plan (MINING_BLOCK_ROWS)")
    parser.add_argument("--plan-images", type=int, default=1_000_000, help="0: no plan")
    parser.add_argument("--plan-workers", type=int, default=8)
    parser.add_argument("--job", type=int, default=0, help="also run the job through the database on this many images")
    parser.add_argument("--job-block", type=int, default=50_000, help="MINING_BLOCK_ROWS of the spread job")
    parser.add_argument("--job-workers", type=int, default=2)
    parser.add_argument("--job-database", default="sb_mining_bench")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--job-child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job_child:
        name, *words = args.job_child
        steps = {"seed": job_seed, "single": job_single, "start": job_start, "worker": job_worker}
        steps["compare"] = job_compare
        steps[name](*[int(word) if word.isdigit() else word for word in words])
        return
    if args.child:
        method, path, out, block = args.child
        child(method, path, out, args.device, int(block))
        return
    try:
        import faiss

        version = f"faiss {faiss.__version__}"
    except ImportError:
        version = "faiss not installed"
        if set(args.methods) & set(FAISS_METHODS):
            print("faiss is not installed (`make install` installs requirements-dev.txt): its rows are left out")
        args.methods = [m for m in args.methods if m not in FAISS_METHODS]
    print(f"range [{THRESHOLD}, {CEILING}), 1024-d float16, {args.data} data; device {args.device}")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start; {version}")
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
                if method == "hnsw" and size > args.hnsw_up_to:
                    print(f"{'hnsw':<8} left out above {args.hnsw_up_to:,} images (--hnsw-up-to): its build is costly")
                    continue
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
    if args.job:
        job_bench(args)


if __name__ == "__main__":
    main()
