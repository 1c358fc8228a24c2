"""The test suite's wall time: `make test-fast` and `make test`, each run `--runs` times in a row, with their pass
counts and the machine's load beside them (a suite on a busy machine is slower; the targets are for a quiet one).

    python bench/suite.py [--runs 1] [--only test|test-fast] [--workers N]

Prints one row per run and exits 1 if any run failed, so `--runs 10` is also "ten green runs in a row". Each row
also gives the machine's speed just before the run (nanoseconds for one step of a plain Python loop, on one core):
machines of one "kind" differ by a factor of two and more, and a suite's seconds mean little without it. The loop
runs on the interpreter that runs this script, printed first (the suite runs on the venv's). And the CPU the
machine spent during the run, from /proc/stat (every process's, the embedded PostgreSQL's too: the suite's own on a
quiet machine), with the time the hypervisor gave to other guests (steal): on a shared machine the wall time of
the same suite moves by a third, its CPU much less, so a change is best judged by the CPU of runs one after the
other.

`floor s` is that CPU divided by the cores this script may run on: the least wall time those core-seconds can take
on this machine, however the work is spread. With `--workers 0` the tests run in one process, without xdist: its
CPU is then the suite's own work (no worker starts, no controller), and its floor the shortest run any number of
workers could reach here.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"test-fast": 60.0, "test": 180.0}
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
SUMMARY = re.compile(r"=+ (.*?) in ([\d.]+)s")


def loop_ns() -> float:
    """Nanoseconds per step of a plain Python loop (the best of three runs of 2 million steps)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for step in range(2_000_000):
            total += step
        best = min(best, time.perf_counter() - started)
    return best / 2_000_000 * 1e9


def cpu_seconds() -> tuple[float, float] | None:
    """(busy, steal) core-seconds of the whole machine since it started, from /proc/stat; None where there is none."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields)
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def run(target: str, workers: int | None, log: Path) -> dict:
    command = ["make", "--no-print-directory", target]
    if workers is not None:
        command.append(f"TEST_WORKERS={workers}")
    speed = loop_ns()
    load = os.getloadavg()[0]
    cpu_before = cpu_seconds()
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.call(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - started
    cpu_after = cpu_seconds()
    busy = steal = None
    if cpu_before and cpu_after:
        busy, steal = (after - before for after, before in zip(cpu_after, cpu_before, strict=True))
    summaries = SUMMARY.findall(log.read_text(errors="replace"))
    counts = summaries[-1][0] if summaries else "no pytest summary"
    return {
        "target": target,
        "code": code,
        "wall": wall,
        "cpu": busy,
        "steal": steal,
        "counts": counts,
        "load": load,
        "speed": speed,
    }


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", choices=sorted(TARGETS))
    parser.add_argument(
        "--workers", type=int, help="xdist workers (the Makefile's TEST_WORKERS; 0: the tests in one process)"
    )
    args = parser.parse_args()
    targets = [args.only] if args.only else ["test-fast", "test"]
    logs = ROOT / "var" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    print(f"loop ns measured on {sys.executable} (Python {sys.version.split()[0]})")
    print(
        f"{'target':<10} {'run':>3} {'wall s':>7} {'target s':>8} {'cpu s':>6} {'floor s':>7} {'steal s':>7}"
        f" {'load':>5} {'loop ns':>7}  result"
    )
    failed = 0
    for number in range(1, args.runs + 1):
        for target in targets:
            row = run(target, args.workers, logs / f"suite-{target}-{number}.log")
            ok = row["code"] == 0
            failed += not ok
            verdict = "" if ok else f"  FAILED (exit {row['code']}, log {logs / f'suite-{target}-{number}.log'})"
            print(
                f"{target:<10} {number:>3} {row['wall']:>7.1f} {TARGETS[target]:>8.0f} {seconds(row['cpu']):>6}"
                f" {seconds(row['cpu'] and row['cpu'] / CORES):>7}"
                f" {seconds(row['steal']):>7} {row['load']:>5.2f} {row['speed']:>7.0f}"
                f"  {row['counts']}{verdict}",
                flush=True,
            )
    print(f"{args.runs * len(targets) - failed} green, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
