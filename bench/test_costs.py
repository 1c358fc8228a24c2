"""What each test costs: a pytest plugin that records every test's wall time and CPU, and a summary of what it wrote.

    PYTHONPATH=bench TEST_COSTS=/tmp/costs PYTEST_ADDOPTS="-p test_costs" make test
    python bench/test_costs.py /tmp/costs [--top 40]

Each test process (the controller and every xdist worker) writes `<worker>.json` into TEST_COSTS: per test, its wall
seconds, the CPU seconds of the process itself (getrusage: the test, and the live server's thread where it has one)
and of the whole machine during it (/proc/stat: Chromium, real workers, PostgreSQL, and whatever else ran then, so
only meaningful on a quiet machine, or with one worker). The summary prints the totals, then the modules that cost
most. A few of the suite's own tests run pytest in a child process, which finds no plugin there and fails: leave
them out of a measuring run or read past them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections import defaultdict
from pathlib import Path

import pytest

WORKER = os.getenv("PYTEST_XDIST_WORKER", "controller")
ROWS: list[tuple[str, float, float, float]] = []


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_cpu() -> float:
    """CPU seconds of every core so far: user, nice, system, irq and softirq."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:]]
    return (sum(ticks[:3]) + ticks[5] + ticks[6]) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    wall, own, machine = time.monotonic(), process_cpu(), machine_cpu()
    yield
    ROWS.append((item.nodeid, time.monotonic() - wall, process_cpu() - own, machine_cpu() - machine))


def pytest_sessionfinish(session):
    folder = Path(os.environ["TEST_COSTS"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{WORKER}.json").write_text(json.dumps({"process_cpu": process_cpu(), "tests": ROWS}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    tests = []
    for path in sorted(args.folder.glob("*.json")):
        written = json.loads(path.read_text())
        print(f"{path.stem}: {written['process_cpu']:.1f} CPU-s in all, {len(written['tests'])} tests")
        tests.extend(written["tests"])
    modules: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for nodeid, wall, own, machine in tests:
        module = modules[nodeid.split("::")[0]]
        module[0] += 1
        module[1] += wall
        module[2] += own
        module[3] += machine
    wall, own = sum(test[1] for test in tests), sum(test[2] for test in tests)
    print(f"{len(tests)} tests: {wall:.1f} s of wall, {own:.1f} CPU-s of the test processes")
    print(f"{'module':<72} {'tests':>5} {'wall s':>7} {'own CPU-s':>9} {'machine CPU-s':>13}")
    for name, (count, wall, own, machine) in sorted(modules.items(), key=lambda item: -item[1][2])[: args.top]:
        print(f"{name:<72} {count:>5} {wall:>7.1f} {own:>9.1f} {machine:>13.1f}")


if __name__ == "__main__":
    main()
