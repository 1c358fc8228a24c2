"""The suite's scheduler (tests/scheduling.py), run on a small suite of its own under pytest-xdist: a module whose
tests share a module-scoped world goes to one worker, whole, and its world is built once; longest units first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from devtools.localservices import BASE_DIR
from tests.scheduling import UNITS_KEY, order_longest_first, spread, unit_scheduling_class, write_units

CONFTEST = """
from tests import scheduling

def pytest_configure(config):
    scheduling.register(config)
"""

SHARED_WORLD = """
import os
import pytest

@pytest.fixture(scope="module")
def world():
    with open(os.environ["BUILDS_FILE"], "a") as builds:
        builds.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
    return {"built": True}

@pytest.mark.parametrize("number", range(6))
def test_reads_the_world(world, number, record_property):
    record_property("worker", os.environ.get("PYTEST_XDIST_WORKER", "main"))
    assert world["built"]
"""

ALONE = """
import pytest

@pytest.mark.parametrize("number", range(6))
def test_alone(number):
    assert number >= 0
"""


def run_small_suite(tmp_path, *arguments: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_shared.py").write_text(textwrap.dedent(SHARED_WORLD))
    (tmp_path / "test_alone.py").write_text(textwrap.dedent(ALONE))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    temp = tmp_path / "temp"  # the controller's temporary folders (the units file's) are made here
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(BASE_DIR), "BUILDS_FILE": str(tmp_path / "builds.txt"), "TMPDIR": str(temp)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:django", "-p", "no:cacheprovider", *arguments],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_module_that_shares_a_world_runs_whole_on_one_worker_and_builds_it_once(tmp_path):
    result = run_small_suite(
        tmp_path, "-q", "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "--junitxml", "report.xml"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "12 passed" in result.stdout
    builds = (tmp_path / "builds.txt").read_text().split()
    assert len(builds) == 1, f"the module's world was built {len(builds)} times, on {builds}"
    report = (tmp_path / "report.xml").read_text()
    workers = {line.split('value="')[1].split('"')[0] for line in report.splitlines() if 'name="worker"' in line}
    assert workers == set(builds), f"the module's tests ran on {sorted(workers)}"
    assert not list((tmp_path / "temp").glob("subtlebench-units-*")), "the units folder is left behind"


def test_units_are_ordered_longest_first_whatever_the_collection_order(tmp_path):
    """With no durations recorded, the six tests that share the world are one unit of 1.8 s (0.3 s guessed for
    each) and come before the six tests alone (0.3 s each), although their module is collected last."""
    result = run_small_suite(tmp_path, "-v", "test_alone.py", "test_shared.py")
    assert result.returncode == 0, result.stdout + result.stderr
    ran = [line.split("::")[0] for line in result.stdout.splitlines() if "::" in line and "PASSED" in line]
    assert ran == ["test_shared.py"] * 6 + ["test_alone.py"] * 6


# Collected in this order: the sessions' tests run in a transaction (pytest-django's first), the browser tests flush.
ORDER_MODULES = ["tests/site/test_sessions.py", "tests/picking/test_picking_browser.py"]


def test_the_suites_order_is_longest_first_after_pytest_django_sorted_it():
    """pytest-django sorts the tests as Django's runner does, browser and end-to-end tests (which flush the database)
    after every test in a transaction; the suite's order comes after that one. With no durations recorded (no cache),
    a browser test (8 s guessed) comes first, and the database tests (0.3 s each) of the module collected first are
    spread among the others, not all before them."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *ORDER_MODULES],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    modules = [line.split("::")[0] for line in result.stdout.splitlines() if "::" in line]
    database_tests, browser_tests = ORDER_MODULES
    assert modules.count(browser_tests) > 1 and modules.count(database_tests) > 1
    assert modules[0] == browser_tests
    last_browser_test = len(modules) - 1 - modules[::-1].index(browser_tests)
    assert modules.index(database_tests) < last_browser_test  # spread, not all after the browser tests


def test_units_that_wait_on_other_processes_are_spread_among_the_others_at_the_same_pace():
    """Each list keeps its order, and at every point each has given about the same share of its total."""
    waiting = [("browser", 30.0), ("worker", 10.0), ("browser", 10.0)]
    busy = [("db", 6.0), ("db", 6.0), ("db", 3.0), ("db", 3.0), ("db", 2.0)]
    merged = spread(waiting, busy, cost=lambda unit: unit[1])
    assert [unit for unit in merged if unit[0] != "db"] == waiting
    assert [unit for unit in merged if unit[0] == "db"] == busy
    # Shares given after each: 30/50 | 6/20, 12/20 | (tie: the first) 40/50 | 15/20, 18/20 | 50/50 | 20/20.
    assert merged == [waiting[0], busy[0], busy[1], waiting[1], busy[2], busy[3], waiting[2], busy[4]]
    assert spread([], busy, cost=lambda unit: unit[1]) == busy


class Worker:
    """A stand-in for xdist's worker controller: it keeps the tests it was sent, in order."""

    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_no_more_than_all_workers_but_one_hold_units_that_wait_on_other_processes(tmp_path):
    """Queued: browser units B0-B3 first (the longest), then units D0-D5 that keep a core busy; three workers. No
    more than two browser units are held at a time: a worker that asks for work then gets the first busy unit, and
    the browser unit keeps its place at the head of the queue; with no busy unit left, it goes out all the same."""
    browser = [f"test_browser.py::test_{number}" for number in range(4)]
    busy = [f"test_db.py::test_{number}" for number in range(6)]
    collection = browser + busy
    units_file = tmp_path / "units.json"
    write_units(units_file, {nodeid: nodeid for nodeid in collection}, outside=browser)
    config = SimpleNamespace(getvalue=lambda name: ["3*popen"], option=SimpleNamespace(loadscopereorder=False))
    scheduler = unit_scheduling_class()(config, None, units_file)
    workers = [Worker(name) for name in ("gw0", "gw1", "gw2")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    b, d = browser, busy

    def held() -> list[list[str]]:
        return [[collection[index] for index in worker.sent] for worker in workers]

    def finish(worker: int, nodeid: str) -> None:
        scheduler.mark_test_complete(workers[worker], collection.index(nodeid))

    # A unit to each worker (the third gets D0, two browser units being held), then one more to each.
    scheduler.schedule()
    assert held() == [[b[0], d[1]], [b[1], d[2]], [d[0], d[3]]]
    assert list(scheduler.workqueue) == [b[2], b[3], d[4], d[5]]
    finish(2, d[0])  # B0 and B1 still held: D4, and B2 stays first in the queue
    assert held()[2] == [d[0], d[3], d[4]] and list(scheduler.workqueue) == [b[2], b[3], d[5]]
    finish(0, b[0])  # one browser unit held: B2 goes out
    assert held()[0] == [b[0], d[1], b[2]] and scheduler.outside_units_held() == 2
    finish(2, d[3])
    assert held()[2][-1] == d[5] and list(scheduler.workqueue) == [b[3]]
    finish(2, d[4])  # no busy unit is left: B3 goes out, although B1 and B2 are held
    assert held()[2][-1] == b[3] and scheduler.outside_units_held() == 3
    assert not scheduler.workqueue


class Item:
    """A stand-in for a collected test: its id and marks (no fixture of the suite's own: a unit of its own)."""

    def __init__(self, nodeid: str, *marks: str):
        self.nodeid = nodeid
        self.marks = marks

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None


def test_a_worker_writes_each_tests_unit_and_the_units_that_wait_on_other_processes(tmp_path):
    items = [Item("a.py::test_db"), Item("b.py::test_page", "browser"), Item("c.py::test_worker", "e2e")]
    units_file = tmp_path / "units.json"
    config = SimpleNamespace(cache=None, workerinput={UNITS_KEY: str(units_file)})
    order_longest_first(config, items)
    # Longest first (10 s and 8 s guessed for the end-to-end and the browser test), the database test spread among them.
    assert [item.nodeid for item in items] == ["c.py::test_worker", "a.py::test_db", "b.py::test_page"]
    written = json.loads(units_file.read_text())
    assert written["units"] == {item.nodeid: item.nodeid for item in items}
    assert sorted(written["outside"]) == ["b.py::test_page", "c.py::test_worker"]
