"""The order in which the xdist workers are handed the tests: longest first, from the durations of earlier runs.

With `--dist loadgroup` each worker asks for the next unit of work when it is nearly done with its own, so handing
out the longest units first (the LPT rule) packs the run: the long end-to-end and browser tests start at once, side
by side, and the short ones fill the gaps, instead of one long test left running alone at the end.

A unit is one test, or a whole module whose tests share a module-scoped fixture (a world `built_once`): such a
module is one xdist group, so its world is built by one worker only. The durations of the last run of each test
(setup, call and teardown) are kept in the pytest cache; a test never run before is guessed from its markers.
The order changes only which worker runs a test and when, never what a test sees: no test depends on another.
"""

from __future__ import annotations

import pytest

CACHE_KEY = "subtlebench/durations"
GROUP_PREFIX = "module:"
# Seconds guessed for a test that has no recorded duration yet (a new test, or a fresh clone).
GUESSES = {"e2e": 10.0, "browser": 8.0, "slow": 5.0}
DEFAULT_GUESS = 0.3


def recorded_nodeid(nodeid: str) -> str:
    """The test's own id, without the `@group` suffix that loadgroup adds."""
    return nodeid.split(f"@{GROUP_PREFIX}", 1)[0]


def guess(item) -> float:
    return max(
        (seconds for marker, seconds in GUESSES.items() if item.get_closest_marker(marker)), default=DEFAULT_GUESS
    )


def shares_a_module_fixture(item) -> bool:
    """Whether the test uses a module- or class-scoped fixture of the suite's own (built once per worker)."""
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return False
    for fixturedefs in definitions.name2fixturedefs.values():
        for fixturedef in fixturedefs:
            if fixturedef.scope in ("module", "class", "package") and fixturedef.baseid.startswith("tests"):
                return True
    return False


def order_longest_first(config, items: list) -> None:
    """Sort `items` in place into units, longest unit first (the same order on every worker: they read the same
    cache file, which only the controller writes, at the end of a run)."""
    durations = config.cache.get(CACHE_KEY, {}) if getattr(config, "cache", None) else {}
    units: dict[str, list] = {}
    for item in items:
        if shares_a_module_fixture(item):
            group = f"{GROUP_PREFIX}{item.path.relative_to(config.rootpath)}"
            item.add_marker(pytest.mark.xdist_group(group))
            units.setdefault(group, []).append(item)
        else:
            units[item.nodeid] = [item]

    def cost(unit: list) -> float:
        return sum(durations.get(item.nodeid, guess(item)) for item in unit)

    # Longest first; equal costs keep the collection order (a stable sort), so the order is total.
    ordered = sorted(units.values(), key=cost, reverse=True)
    items[:] = [item for unit in ordered for item in unit]


class DurationRecorder:
    """On the controller (or a run without xdist): adds up each test's phases and writes them to the cache at the
    end, keeping the durations of tests that this run did not run (`make test-fast` leaves out the browser tests)."""

    def __init__(self, config):
        self.config = config
        self.durations: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        nodeid = recorded_nodeid(report.nodeid)
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session) -> None:
        if not self.durations or getattr(self.config, "cache", None) is None:
            return
        known = self.config.cache.get(CACHE_KEY, {})
        known.update({nodeid: round(seconds, 3) for nodeid, seconds in self.durations.items()})
        self.config.cache.set(CACHE_KEY, known)


def register(config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker's reports reach the controller, which records them
        config.pluginmanager.register(DurationRecorder(config), "subtlebench-durations")
