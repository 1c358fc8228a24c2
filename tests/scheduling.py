"""How the xdist workers are handed the tests: in units, longest unit first, from the durations of earlier runs.

Each worker asks for the next unit of work when it is nearly done with its own, so handing out the longest units
first (the LPT rule) packs the run: the long tests start early and the short ones fill the gaps, instead of one long
test left running alone at the end. The tests that wait on a browser or real workers are spread among the others
(`spread`), so that they do not all wait side by side while the cores idle.

A unit is one test, or a whole module whose tests share a module- or class-scoped fixture of the suite's own (a
world `built_once`): its world is then built once, by the one worker that runs the module, instead of once on every
worker that gets one of its tests (a demo seeded three times, say). In the same way every test marked `torch`
(it imports torch and transformers' DINOv3: about 3 s of CPU for each process that does) is in one unit with the
others, so one worker pays that import instead of each worker.

The units are the suite's own scheduler (`UnitScheduling`), not xdist's `xdist_group` marks: xdist 3.8 groups by a
suffix it writes into each test's node id, which pytest 9.2's node ids no longer take, so every group silently fell
apart. The workers collect the tests, so they know the units: each writes them to a file the controller named
(the same file from every worker, replaced whole), and the controller's scheduler reads it once every worker has
collected. The durations of the last run of each test (setup, call and teardown) are kept in the pytest cache; a
test never run before is guessed from its markers. The order changes only which worker runs a test and when, never
what a test sees: no test depends on another.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

CACHE_KEY = "subtlebench/durations"
UNITS_KEY = "subtlebench_units_file"  # the worker input that names the units file
# Seconds guessed for a test that has no recorded duration yet (a new test, or a fresh clone).
GUESSES = {"e2e": 10.0, "browser": 8.0, "slow": 5.0}
DEFAULT_GUESS = 0.3


def guess(item) -> float:
    return max(
        (seconds for marker, seconds in GUESSES.items() if item.get_closest_marker(marker)), default=DEFAULT_GUESS
    )


def shares_a_module_fixture(item) -> bool:
    """Whether the test uses a module- or class-scoped fixture of the suite's own (built once per worker): one
    defined in a test module or a conftest below the root, not in a plugin (whose fixtures' base id is empty)."""
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return False
    for fixturedefs in definitions.name2fixturedefs.values():
        for fixturedef in fixturedefs:
            if fixturedef.scope in ("module", "class", "package") and fixturedef.baseid:
                return True
    return False


# Tests whose work is largely done in other processes (Chromium, a Celery worker, a live server's requests), and
# that wait on them: three of them side by side left the two cores of the machine a quarter idle.
OUTSIDE_MARKERS = ("browser", "e2e")


def runs_outside(item) -> bool:
    return any(item.get_closest_marker(marker) for marker in OUTSIDE_MARKERS)


def spread(first: list, second: list, cost) -> list:
    """The two lists (each longest first) merged so that each is taken at the same pace: the next unit comes from
    the list that has given the smaller share of its total cost so far (the first on a tie). So the units that wait on
    other processes run beside units that keep a core busy, from the start to the end of the run, instead of all
    together at its start; each list keeps its own order, so the longest units still come early."""
    totals = [sum(cost(unit) for unit in first) or 1.0, sum(cost(unit) for unit in second) or 1.0]
    given = [0.0, 0.0]
    queues = [list(first), list(second)]
    merged = []
    while queues[0] or queues[1]:
        side = 0 if queues[0] and (not queues[1] or given[0] / totals[0] <= given[1] / totals[1]) else 1
        unit = queues[side].pop(0)
        given[side] += cost(unit)
        merged.append(unit)
    return merged


# The unit of the tests marked `torch` (in-process tests only: a browser or end-to-end unit keeps its own).
TORCH_UNIT = "torch"


def unit_of(item, config) -> str:
    """The unit a test is scheduled in: its module's path for a test that shares a module's world, else its id."""
    if shares_a_module_fixture(item):
        return f"module:{item.path.relative_to(config.rootpath)}"
    return item.nodeid


def order_longest_first(config, items: list) -> None:
    """Sort `items` in place into units, longest unit first (the same order on every worker: they read the same
    cache file, which only the controller writes, at the end of a run). On an xdist worker, the units are also
    written to the file the controller's scheduler reads."""
    durations = config.cache.get(CACHE_KEY, {}) if getattr(config, "cache", None) else {}
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(unit_of(item, config), []).append(item)
    join_the_torch_unit(units)

    def cost(unit: list) -> float:
        return sum(durations.get(item.nodeid, guess(item)) for item in unit)

    # Longest first; equal costs keep the collection order (a stable sort), so the order is total. The units that
    # drive a browser or real workers, each longest first, are spread evenly among the others.
    ordered = sorted(units.values(), key=cost, reverse=True)
    outside, inside = [], []
    for unit in ordered:
        (outside if any(runs_outside(item) for item in unit) else inside).append(unit)
    items[:] = [item for unit in spread(outside, inside, cost) for item in unit]
    units_file = getattr(config, "workerinput", {}).get(UNITS_KEY)
    if units_file:
        write_units(Path(units_file), {item.nodeid: key for key, unit in units.items() for item in unit})


def join_the_torch_unit(units: dict[str, list]) -> None:
    """The units with a test marked `torch` merged, in place, into one, `TORCH_UNIT`: whole units, so that a module
    whose tests share a world still builds it once. Units that wait on a browser or real workers stay apart."""
    joining = [
        key
        for key, unit in units.items()
        if any(item.get_closest_marker("torch") for item in unit) and not any(runs_outside(item) for item in unit)
    ]
    if joining:
        units[TORCH_UNIT] = [item for key in joining for item in units.pop(key)]


def write_units(path: Path, units: dict[str, str]) -> None:
    """Written to a file of this process's own and renamed into place: the controller never reads half a file,
    and the workers, which all write the same units, never interleave."""
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(units))
    partial.replace(path)


class DurationRecorder:
    """On the controller (or a run without xdist): adds up each test's phases and writes them to the cache at the
    end, keeping the durations of tests that this run did not run (`make test-fast` leaves out the browser tests)."""

    def __init__(self, config):
        self.config = config
        self.durations: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session) -> None:
        if not self.durations or getattr(self.config, "cache", None) is None:
            return
        known = self.config.cache.get(CACHE_KEY, {})
        known.update({nodeid: round(seconds, 3) for nodeid, seconds in self.durations.items()})
        self.config.cache.set(CACHE_KEY, known)


def unit_scheduling_class():
    """xdist's scope scheduler, with the scope of a test read from the units the workers wrote."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def __init__(self, config, log, units_file: Path):
            super().__init__(config, log)
            self.units_file = units_file
            self.units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            # Called only once every worker has collected (and so written the file).
            if self.units is None:
                try:
                    self.units = json.loads(self.units_file.read_text())
                except FileNotFoundError:
                    raise RuntimeError(f"no worker wrote the test units to {self.units_file}") from None
            return self.units.get(nodeid, nodeid)

    return UnitScheduling


class UnitSchedulingPlugin:
    """On the xdist controller with `--dist loadgroup`: names a units file for the workers (a folder of the run's
    own, removed at the end) and schedules by the units they write there."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="subtlebench-units-"))
        self.units_file = self.folder / "units.json"

    def pytest_configure_node(self, node) -> None:
        node.workerinput[UNITS_KEY] = str(self.units_file)

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config, log):
        return unit_scheduling_class()(config, log, self.units_file)

    def pytest_unconfigure(self, config) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class LongestFirst:
    """Orders the collected tests longest unit first, after every other plugin has ordered them: pytest-django sorts
    them as Django's runner does (tests in a transaction, then tests that flush the database, then tests without a
    database), which would start the long browser and end-to-end tests, most of whose time is spent waiting on a
    browser or a worker, only once every other test had run, all at the same time, with the cores idle while they
    wait. Tests that flush the database may run before others: nothing a test needs is lost by a flush (it keeps
    the rows migrate made: tests/conftest.py)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items) -> None:
        order_longest_first(config, items)


def register(config) -> None:
    config.pluginmanager.register(LongestFirst(), "subtlebench-longest-first")
    if hasattr(config, "workerinput"):  # an xdist worker's reports reach the controller, which records them
        return
    config.pluginmanager.register(DurationRecorder(config), "subtlebench-durations")
    distributed = config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None)
    if distributed and config.getoption("dist", None) == "loadgroup":
        config.pluginmanager.register(UnitSchedulingPlugin(), "subtlebench-units")
