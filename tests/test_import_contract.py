"""The import contract. The layers (api | demo -> evaluation -> annotator -> subtlebench -> benchmark; inside
evaluation, results -> runs | studies), torch with the embedder, no circle among the modules of a models package
or annotator's workflow packages, production without demo or devtools: `.importlinter`, checked here by
`lint-imports`. Read here by hand: `benchmark` (the evaluator's contract and the statistics) imports nothing but the
standard library, the apps take the contract and the statistics from it and never define a copy, only URL
configuration imports api, and no package imports another package's private (underscore) names.

Every import counts, including those inside functions and under TYPE_CHECKING: a lazy import is still a
dependency, and hiding a circle inside a function is how the old flat layout grew one.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.localservices import BASE_DIR

PACKAGES = ("benchmark", "subtlebench", "annotator", "evaluation", "api", "demo", "devtools")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(BASE_DIR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def imported_modules(path: Path, module: str, tree: ast.Module | None = None) -> set[str]:
    """Every module an import statement in this file names, anywhere in the file (relative ones resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree or parse(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            # `from annotator import picking` imports the module annotator.picking.
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def source_files() -> dict[str, Path]:
    files = {}
    for package in PACKAGES:
        for path in sorted((BASE_DIR / package).rglob("*.py")):
            if "migrations" not in path.parts:
                files[module_name(path)] = path
    return files


FILES = source_files()


@pytest.fixture(scope="module")
def trees() -> dict[str, ast.Module]:
    """Every source file parsed, once for the module (whose tests then run on one xdist worker), when a test first
    asks, not when every worker collects the module."""
    return {module: parse(path) for module, path in FILES.items()}


@pytest.fixture(scope="module")
def imports(trees) -> dict[str, set[str]]:
    return {module: imported_modules(path, module, trees[module]) for module, path in FILES.items()}


def top(module: str) -> str:
    return module.split(".")[0]


def violations(imports, rule) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in imports.items()
        for target in targets
        if rule(module, target)
    )


def test_it_reads_every_package(imports):
    assert {top(module) for module in FILES} == set(PACKAGES)
    assert "annotator.picking.services" in imports and "evaluation.studies.services" in imports
    assert "benchmark.records" in imports


def test_benchmark_imports_only_the_standard_library_and_itself(imports):
    """No app, no Django (not even settings), no torch, no third-party package: configuration comes in as arguments."""

    def rule(module, target):
        return top(module) == "benchmark" and top(target) not in ("benchmark", *sys.stdlib_module_names)

    assert violations(imports, rule) == []
    assert "benchmark.apportion" in imports["benchmark.splits"] and "hashlib" in imports["benchmark.splits"]


def test_the_apps_take_the_contract_from_benchmark(imports):
    users = {
        "annotator.export.services": "benchmark.splits",
        "annotator.export.format": "benchmark.records",
        "annotator.export.pair_import": "benchmark.records",
        "annotator.picking.questions": "benchmark.questions",
        "evaluation.runs.services": "benchmark.protocol",
        "annotator.models.taxonomy": "benchmark.taxonomy",
        "evaluation.studies.sampling": "benchmark.apportion",
        "evaluation.models.studies": "benchmark.records",
    }
    assert {module: target for module, target in users.items() if target not in imports[module]} == {}
    assert "benchmark.results" in imports["evaluation.runs.results_files"]  # the results file, written and read


LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path, config: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(config)],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_import_linter_contracts_hold():
    """`.importlinter`'s six contracts, on the whole tree: a broken one prints the import that breaks it."""
    checked = lint_imports(BASE_DIR, BASE_DIR / ".importlinter")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Contracts: 6 kept, 0 broken." in checked.stdout


@pytest.mark.parametrize(
    "module, source, broken",
    [
        ("annotator/bad.py", "import evaluation.runs\n", "annotator.bad -> evaluation.runs"),
        (
            "evaluation/studies/bad.py",
            "from evaluation.results import x\n",
            "evaluation.studies.bad -> evaluation.results",
        ),
        ("evaluation/runs/bad.py", "import evaluation.studies\n", "evaluation.runs.bad -> evaluation.studies"),
        ("annotator/videos/bad.py", "def later():\n    import torch\n", "annotator.videos.bad -> torch"),
        ("benchmark/bad.py", "import django\n", "benchmark.bad -> django"),
        ("annotator/models/bad.py", "from annotator.models import good\n", "No cycles are allowed in annotator.models"),
    ],
)
def test_the_import_linter_contracts_catch_a_wrong_import(tmp_path, module, source, broken):
    """The same contracts on a small tree of empty packages with one wrong import: the contract it breaks says so."""
    for package in [
        "benchmark",
        "subtlebench",
        "annotator",
        "annotator/models",
        "annotator/similarity",
        "annotator/videos",
        "evaluation",
        "evaluation/models",
        "evaluation/results",
        "evaluation/runs",
        "evaluation/studies",
        "api",
        "demo",
        "devtools",
    ]:
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "annotator/similarity/embedder.py").write_text("import torch\nimport transformers\n")
    (tmp_path / "annotator/models/good.py").write_text("from annotator.models import bad\n")
    (tmp_path / module).write_text(source)
    checked = lint_imports(tmp_path, BASE_DIR / ".importlinter")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "1 broken" in checked.stdout and broken in checked.stdout


def test_only_url_configuration_imports_api(imports):
    def rule(module, target):
        return top(target) == "api" and top(module) != "api" and not module.endswith("urls")

    assert violations(imports, rule) == []


def unit(module: str) -> str | None:
    """The workflow unit a module belongs to: annotator.<package> or annotator.<module>, evaluation.<module>,
    api.<module>; None outside the apps."""
    parts = module.split(".")
    if parts[0] not in ("annotator", "evaluation", "api") or len(parts) < 2:
        return None
    if parts[1] == "management":
        return ".".join(parts[:4]) if len(parts) >= 4 else None
    return ".".join(parts[:2])


def unit_graph(imports) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, targets in imports.items():
        source = unit(module)
        if source is None:
            continue
        edges = graph.setdefault(source, set())
        for target in targets:
            destination = unit(target)
            if destination is not None and destination != source and destination in {unit(m) for m in FILES}:
                edges.add(destination)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of units (first == last), or None. Depth-first search with colours."""
    colour = dict.fromkeys(graph, "white")
    stack: list[str] = []

    def visit(node):
        colour[node] = "grey"
        stack.append(node)
        for following in sorted(graph.get(node, ())):
            if colour.get(following, "white") == "grey":
                return [*stack[stack.index(following) :], following]
            if colour.get(following, "white") == "white":
                found = visit(following)
                if found:
                    return found
        stack.pop()
        colour[node] = "black"
        return None

    for node in sorted(graph):
        if colour[node] == "white":
            found = visit(node)
            if found:
                return found
    return None


def test_no_circle_between_workflow_packages(imports):
    cycle = find_cycle(unit_graph(imports))
    assert cycle is None, "circular imports: " + " -> ".join(cycle)


def test_the_models_package_imports_no_workflow_package(imports):
    """Models are the floor every workflow stands on: a model that imports a workflow's services is a circle."""

    def rule(module, target):
        return module.startswith("annotator.models") and unit(target) not in (None, "annotator.models")

    assert violations(imports, rule) == []


@pytest.mark.parametrize(
    "graph, cycle",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"b2"}, "b2": {"b"}}, ["b", "b2", "b"]),
    ],
)
def test_the_cycle_finder_finds_circles(graph, cycle):
    assert find_cycle(graph) == cycle


def test_the_import_reader_counts_imports_inside_functions_and_relative_ones(tmp_path):
    source = tmp_path / "services.py"
    source.write_text(
        "from annotator.models import Pair\n"
        "def later():\n"
        "    from annotator import export\n"
        "    if True:\n"
        "        import torch.nn\n"
        "from .questions import TEMPLATES\n"
        "from .. import captions\n"
    )
    found = imported_modules(source, "annotator.picking.services")
    assert {"annotator.models", "annotator.export", "torch.nn", "annotator.picking.questions"} <= found
    assert "annotator.captions" in found


# --- The contract is defined in benchmark/ only -----------------------------------------------------------------

# Functions only benchmark/ may define: a second one is a second rule, and the two drift apart.
CONTRACT_FUNCTIONS = {
    "round_half_up",
    "largest_remainder",
    "largest_remainders",
    "apportion",
    "apportion_sizes",
    "item_id",
    "record_item_id",
    "exported_source_id",
    "question_problems",
    "option_key",
    "shuffle_options",
    "parse_answer",
    "lettered",
    "messages_for",
    "choose_val_groups",
    "balance_answers",
    "answer_place",
    "dataset_card",
    "results_document",
    "question_entry",
}
BINARY_NAMES = {"state", "emotion", "temporal", "quantity", "quality"}
CATEGORY_NAMES = BINARY_NAMES | {"attribute", "spatial", "existence", "viewpoint", "action"}
ABBREVIATION_NAMES = {"AT", "ST", "EM", "TM", "SP", "EX", "QN", "QL", "VP", "AC"}


def names_in(node) -> set[str]:
    """The strings a literal collection holds, plain ("state") or as a choice (`Category.STATE`)."""
    found = set()
    for element in getattr(node, "elts", None) or getattr(node, "keys", None) or []:
        if isinstance(element, ast.Constant) and isinstance(element.value, str):
            found.add(element.value)
        elif isinstance(element, ast.Attribute):
            found.add(element.attr.lower())
    for element in getattr(node, "values", None) or []:
        if isinstance(element, ast.Constant) and isinstance(element.value, str):
            found.add(element.value)
    return found


def contract_copies(path: Path, tree: ast.Module | None = None) -> list[str]:
    """Each place in a file that restates a piece of the contract instead of importing it from benchmark/."""
    found = []
    shown = path.relative_to(BASE_DIR) if path.is_relative_to(BASE_DIR) else path.name  # once per file, not per node
    for node in ast.walk(tree or parse(path)):
        where = f"{shown}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in CONTRACT_FUNCTIONS:
            found.append(f"{where}: defines {node.name}()")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "ABCDE" in node.value or "[A-E]" in node.value:
                found.append(f"{where}: the answer letters {node.value!r}")
            elif node.value in ("first image", "second image"):
                found.append(f"{where}: the binary option {node.value!r}")
        elif isinstance(node, ast.Set | ast.List | ast.Tuple | ast.Dict):
            names = names_in(node)
            if names & CATEGORY_NAMES == BINARY_NAMES:  # the binary ones and no other category
                found.append(f"{where}: a list of the binary categories")
            if ABBREVIATION_NAMES <= names:
                found.append(f"{where}: the category abbreviations")
        elif isinstance(node, ast.JoinedStr):
            # f"{category}_{source}_{source_id}": the item id built by hand.
            parts = ["_" if isinstance(v, ast.Constant) and v.value == "_" else ast.unparse(v) for v in node.values]
            if len(parts) == 5 and parts[1] == parts[3] == "_" and "category" in parts[0] and "source" in parts[2]:
                found.append(f"{where}: the item id built by hand")
    return found


def private_imports(module: str, tree: ast.Module) -> list[str]:
    """`from x import _name` where x is in another package than the module: a name with one leading underscore is
    its package's own, and another package that needs it needs a public name (or the function moved)."""
    package = module.rpartition(".")[0]
    return [
        f"{module} imports {node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.rpartition(".")[0] != package
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


def test_no_package_takes_another_packages_private_names(trees):
    assert [found for module in FILES for found in private_imports(module, trees[module])] == []


def test_the_private_import_finder_finds_them():
    tree = ast.parse(
        "from annotator.picking.services import _frames, video_frame_pair\n"
        "from annotator.collections.views import _mine\n"
        "from annotator.collections.services import __all__\n"
    )
    assert private_imports("annotator.collections.views", tree) == [
        "annotator.collections.views imports annotator.picking.services._frames"
    ]


def test_no_app_restates_the_contract(trees):
    copies = [
        copy
        for module, path in FILES.items()
        if top(module) != "benchmark"
        for copy in contract_copies(path, trees[module])
    ]
    assert copies == []


def test_the_copy_finder_finds_copies(tmp_path):
    source = tmp_path / "copy.py"
    source.write_text(
        "LETTERS = 'ABCDE'\n"
        "def round_half_up(x):\n    return int(x + 0.5)\n"
        "BINARY = frozenset({Category.STATE, Category.EMOTION, Category.TEMPORAL, Category.QUANTITY, "
        "Category.QUALITY})\n"
        "FIRST = 'first image'\n"
        "def ident(r):\n    return f\"{r['category']}_{r['source']}_{r['source_id']}\"\n"
        "ok = f'{a}_{b}'\n"
    )
    assert sorted(line.split(": ", 1)[1] for line in contract_copies(source)) == [
        "a list of the binary categories",
        "defines round_half_up()",
        "the answer letters 'ABCDE'",
        "the binary option 'first image'",
        "the item id built by hand",
    ]


# --- The statistics are defined in benchmark/ only --------------------------------------------------------------

# A function whose name says it computes one of benchmark's statistics: Wilson's interval, Cohen's kappa, McNemar's
# test, a quantile, the pieces of a cluster-robust interval. Fleiss' kappa and Krippendorff's alpha of a study have
# one home, evaluation.studies.metrics, and no copy in benchmark/.
STATISTIC_NAME = re.compile(
    r"wilson|cohen|mcnemar|quantile|student_t|incomplete_beta|binomial_two_sided|cluster_robust|effective_size"
    r"|variance_floor|accuracy_interval|difference_interval|^t95$|^z95$"
)
# The normal's two-sided 90%, 95% and 99% quantiles, written out (1.96, 1.959964, 1.645, 2.576, ...).
NORMAL_QUANTILES = (1.6448536269514722, 1.959963984540054, 2.5758293035489004)
# Calls that compute a quantile or a tail probability: the makings of an interval or a p-value.
DISTRIBUTION_CALLS = {"inv_cdf", "ppf", "isf", "erfc", "erf", "erfinv", "betainc", "betaincinv"}


def statistics_copies(path: Path, tree: ast.Module | None = None) -> list[str]:
    """Each place in a file that computes one of benchmark's statistics itself instead of importing it."""
    found = []
    shown = path.relative_to(BASE_DIR) if path.is_relative_to(BASE_DIR) else path.name
    for node in ast.walk(tree or parse(path)):
        where = f"{shown}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and STATISTIC_NAME.search(node.name.lower()):
            found.append(f"{where}: defines {node.name}()")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [target.id for target in targets if isinstance(target, ast.Name)]
            found += [f"{where}: defines {name}" for name in names if STATISTIC_NAME.search(name.lower())]
        elif isinstance(node, ast.Constant) and isinstance(node.value, float) and not isinstance(node.value, bool):
            if any(abs(node.value - quantile) < 1e-3 for quantile in NORMAL_QUANTILES):
                found.append(f"{where}: the normal quantile {node.value!r}")
        elif isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in DISTRIBUTION_CALLS:
                found.append(f"{where}: calls {called}()")
    return found


def test_no_app_computes_the_statistics_itself(trees):
    copies = [
        copy
        for module, path in FILES.items()
        if top(module) != "benchmark"
        for copy in statistics_copies(path, trees[module])
    ]
    assert copies == []
    # ... and they are there to be found: the finder sees benchmark's own.
    found = " ".join(statistics_copies(FILES["benchmark.intervals"], trees["benchmark.intervals"]))
    assert "defines wilson()" in found and "defines difference_interval()" in found
    found = " ".join(statistics_copies(FILES["benchmark.paired"], trees["benchmark.paired"]))
    assert "defines cohen_kappa()" in found and "defines mcnemar()" in found and "calls erfc()" in found
    found = " ".join(statistics_copies(FILES["benchmark.quantiles"], trees["benchmark.quantiles"]))
    assert "defines student_t_quantile()" in found and "the normal quantile 1.959963984540054" in found


def test_the_apps_take_the_statistics_from_benchmark(imports):
    users = {
        "evaluation.studies.metrics": "benchmark.intervals",
        "evaluation.results.judge_check": "benchmark.paired",
        "annotator.stats.figures": "benchmark.paired",
        "evaluation.results.compare": "benchmark.paired",
    }
    assert {module: target for module, target in users.items() if target not in imports[module]} == {}


def test_the_statistics_finder_finds_copies(tmp_path):
    source = tmp_path / "copy.py"
    source.write_text(
        "import math\n"
        "from statistics import NormalDist\n"
        "Z = 1.96\n"
        "def wilson_interval(k, n):\n    return k / n\n"
        "def cohen_kappa(pairs):\n    return 0\n"
        "def my_mcnemar(b, c):\n    return math.erfc(abs(b - c))\n"
        "T95: float = 2.262\n"
        "z = NormalDist().inv_cdf(0.975)\n"
        "half = 2.5758 * 0.1\n"
        "def fleiss_kappa(units):\n    return 0.5\n"
    )
    assert sorted(line.split(": ", 1)[1] for line in statistics_copies(source)) == [
        "calls erfc()",
        "calls inv_cdf()",
        "defines T95",
        "defines cohen_kappa()",
        "defines my_mcnemar()",
        "defines wilson_interval()",
        "the normal quantile 1.96",
        "the normal quantile 2.5758",
    ]
