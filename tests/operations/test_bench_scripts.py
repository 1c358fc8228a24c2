"""The bench/ scripts cannot rot unseen: CI runs every one at a tiny size (`make bench-smoke`, bench/smoke.sh) after the
README's test command, and a script run by path, which puts its own folder first on sys.path, finds no module there
that hides one of the standard library's or the project's (as tests/collections hid `collections` from a script of
tests/ run by path: those run as modules, `python -m tests.model_server`)."""

from __future__ import annotations

import sys

from devtools.localservices import BASE_DIR

BENCH = BASE_DIR / "bench"


def test_nothing_beside_the_bench_scripts_hides_a_module_of_the_standard_library_or_of_the_project():
    project = {path.name for path in BASE_DIR.iterdir() if (path / "__init__.py").exists()}
    assert {"annotator", "subtlebench", "tests"} <= project
    beside = {path.name.removesuffix(".py") for path in BENCH.iterdir() if path.is_dir() or path.suffix == ".py"}
    assert beside & (set(sys.stdlib_module_names) | project) == set()


def test_the_smoke_run_names_every_bench_script():
    smoke = (BENCH / "smoke.sh").read_text()
    scripts = sorted(path.name for path in BENCH.iterdir() if path.suffix in (".py", ".sh") and path.name != "smoke.sh")
    assert scripts and [name for name in scripts if name not in smoke] == []


def test_ci_runs_the_bench_smoke_after_exactly_the_readmes_test_command():
    lines = (BASE_DIR / ".ci" / "run").read_text().splitlines()
    assert "make test" in lines and "make bench-smoke" in lines
    assert lines.index("make test") < lines.index("make bench-smoke")
    readme = (BASE_DIR / "README.md").read_text().splitlines()
    assert any(line.split("#")[0].strip() == "make test" for line in readme)
