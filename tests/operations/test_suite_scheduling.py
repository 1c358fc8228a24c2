"""The suite's scheduler (tests/scheduling.py), run on a small suite of its own under pytest-xdist: a module whose
tests share a module-scoped world goes to one worker, whole, and its world is built once; longest units first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from xml.etree import ElementTree

from devtools.localservices import BASE_DIR
from tests.scheduling import TORCH_UNIT, join_the_torch_unit, spread

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

# The plugins the suite's own runs leave out (pyproject.toml's addopts), and pytest-django: loading them cost each
# process of the small suite about a second of CPU, for tests that use none of them.
PYPROJECT = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())
LEFT_OUT = ["-p", "no:django"] + [
    option
    for plugin in re.findall(r"-p (no:\S+)", PYPROJECT["tool"]["pytest"]["ini_options"]["addopts"])
    for option in ("-p", plugin)
]

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
        [sys.executable, "-m", "pytest", *LEFT_OUT, "-p", "no:cacheprovider", *arguments],
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


# Tests that import torch: three alone (collected first, so that without the torch unit both workers would start on
# one of them), and a module whose world one of its tests needs torch for.
TORCH_ALONE = """
import os
import pytest

@pytest.mark.torch
@pytest.mark.parametrize("number", range(3))
def test_imports_torch(number, record_property):
    record_property("worker", os.environ["PYTEST_XDIST_WORKER"])
"""

TORCH_WORLD = """
import os
import pytest

@pytest.fixture(scope="module")
def world():
    with open(os.environ["BUILDS_FILE"] + ".torch", "a") as builds:
        builds.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return {"built": True}

@pytest.mark.torch
def test_embeds_in_the_world(world, record_property):
    record_property("worker", os.environ["PYTEST_XDIST_WORKER"])

@pytest.mark.parametrize("number", range(2))
def test_reads_the_world(world, number, record_property):
    record_property("worker", os.environ["PYTEST_XDIST_WORKER"])
"""


def test_the_tests_marked_torch_run_on_one_worker_with_the_whole_world_of_their_module(tmp_path):
    (tmp_path / "test_a_torch.py").write_text(textwrap.dedent(TORCH_ALONE))
    (tmp_path / "test_b_world.py").write_text(textwrap.dedent(TORCH_WORLD))
    result = run_small_suite(
        tmp_path, "-q", "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "--junitxml", "report.xml"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "18 passed" in result.stdout
    workers = {}
    for case in ElementTree.parse(tmp_path / "report.xml").iter("testcase"):
        for recorded in case.iter("property"):
            workers[f"{case.get('classname')}.{case.get('name')}"] = recorded.get("value")
    torch_tests = {test: worker for test, worker in workers.items() if "test_a_torch" in test or "test_b_world" in test}
    assert len(torch_tests) == 6
    assert len(set(torch_tests.values())) == 1, f"the torch tests ran on {torch_tests}"
    builds = (tmp_path / "builds.txt.torch").read_text().split()
    assert builds == list(set(torch_tests.values())), f"the world was built on {builds}"


class StandIn:
    """A collected test, as far as the torch unit looks at it: its markers."""

    def __init__(self, *markers: str):
        self.markers = markers

    def get_closest_marker(self, name: str):
        return name if name in self.markers else None


def test_the_torch_unit_takes_whole_units_and_leaves_those_that_wait_on_a_browser_apart():
    world = [StandIn(), StandIn("torch"), StandIn()]
    alone = [StandIn("torch")]
    browser = [StandIn("torch", "browser")]
    plain = [StandIn()]
    units = {"module:test_world.py": world, "test_alone.py::test": alone, "test_browser.py::test": browser}
    units["test_plain.py::test"] = plain
    join_the_torch_unit(units)
    assert units == {"test_browser.py::test": browser, "test_plain.py::test": plain, TORCH_UNIT: world + alone}


class FakeItem:
    """What the marking hook reads of a collected test: its fixture names, its parameters, the marks it is given."""

    def __init__(self, fixturenames, params=None):
        self.fixturenames = fixturenames
        if params is not None:
            self.callspec = type("CallSpec", (), {"params": params})()
        self.marks = []

    def add_marker(self, mark):
        self.marks.append(mark.name)


def test_a_parameter_named_like_a_browser_fixture_marks_nothing():
    """`parametrize("page", ...)` (the documentation-link tests) starts no browser: such a test stays in make
    test-fast; the `page` fixture itself still makes a browser test."""
    from tests.conftest import pytest_collection_modifyitems

    links = FakeItem(["page"], params={"page": "README.md"})
    browser = FakeItem(["page", "live_server"])
    pytest_collection_modifyitems(None, [links, browser])
    assert links.marks == [] and browser.marks == ["browser"]
