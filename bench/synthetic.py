"""Benchmark of synthetic sweeps: pairs generated per second on one core at 512x512 (each family, then all five in
turn; target at least 100 pairs/s), and the wall time of a 5 x 5 sweep of 20 pairs per cell end to end
(`manage.py generate_sweep`: define, generate, store both PNGs, write the pairs, finish the job and queue their
similarity), in a fresh process with its own media folder.

Run: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/sb_bench CELERY_BROKER_URL=redis://127.0.0.1:6379/9 \
     python bench/synthetic.py [--pairs 200] [--skip-sweep]
The sweep part migrates that database and leaves the sweep's rows in it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotator.synthetic.generator import FAMILIES, synthetic_pair  # noqa: E402 (the path above first)


def pairs_per_second(family: str | None, count: int, size: int) -> float:
    families = [family] if family else list(FAMILIES)
    started = time.perf_counter()
    for index in range(count):
        synthetic_pair(families[index % len(families)], seed=1, index=index, size=size)
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200, help="pairs per family for the rate (default 200)")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--skip-sweep", action="store_true", help="only the generator's rate (no database)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    pairs_per_second("quantity", 10, args.size)  # warm up imports and fonts
    print(f"generator, one core, {args.size}x{args.size}, PNG (palette), {args.pairs} pairs per family:")
    for family in FAMILIES:
        print(f"  {family:<10} {pairs_per_second(family, args.pairs, args.size):8.1f} pairs/s")
    overall = pairs_per_second(None, args.pairs * len(FAMILIES), args.size)
    print(f"  {'all five':<10} {overall:8.1f} pairs/s  (target >= 100)")
    if args.skip_sweep:
        return
    env = {**os.environ}
    with tempfile.TemporaryDirectory(prefix="bench-synthetic-") as folder:
        env["MEDIA_ROOT"] = folder
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "-v0"], check=True, env=env, cwd=ROOT)
        command = [
            *manage,
            "generate_sweep",
            "quantity",
            "--vary",
            "object_size=10,20,30,40,50",
            "--vary",
            "object_count=4,8,16,24,32",
            "--per-cell",
            "20",
            "--size",
            str(args.size),
            "--title",
            "bench 5x5",
        ]
        started = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"generate_sweep failed:\n{done.stderr[-3000:]}")
        seconds = time.perf_counter() - started
        stored = sum(1 for _ in Path(folder).rglob("*.png"))
    print(done.stdout.strip().splitlines()[-1])
    print(f"5 x 5 sweep, 20 per cell (500 pairs, {stored} PNG files): {seconds:.1f} s end to end, "
          f"{500 / seconds:.1f} pairs/s (process start and Django setup included)")  # fmt: skip


if __name__ == "__main__":
    main()
