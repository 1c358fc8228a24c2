"""The documentation keeps up with the code: every environment variable is documented, none is stale, every
relative link (and its heading) resolves, and the README stays a five-minute read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
# The code a deployment or a developer configures: the apps, the development tooling, manage.py.
# bench/ and tests/ read their own knobs, documented beside them.
APP_CODE = ("subtlebench", "annotator", "evaluation", "api", "demo", "devtools", "manage.py")
ENV_HELPERS = {"envbool", "envint", "envfloat", "envlist", "envpaths"}  # settings.py: os.getenv with a type


def app_modules() -> list[Path]:
    files = []
    for name in APP_CODE:
        path = ROOT / name
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", "") == "os"


def environment_reads(tree: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(node, name expression) for every read of an environment variable in a module."""
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            os_getenv = name == "getenv"
            environ_get = name == "get" and isinstance(function, ast.Attribute) and is_os_environ(function.value)
            if os_getenv or environ_get or name in ENV_HELPERS:
                reads.append((node, node.args[0]))
        elif isinstance(node, ast.Subscript) and is_os_environ(node.value) and isinstance(node.ctx, ast.Load):
            reads.append((node, node.slice))
        elif isinstance(node, ast.Compare) and any(is_os_environ(c) for c in node.comparators):
            reads.append((node, node.left))  # "X" in os.environ
    return reads


def helper_bodies(tree: ast.AST) -> set[int]:
    """ids of the nodes inside the env helpers' definitions, where the name is a parameter by design."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in ENV_HELPERS:
            inside |= {id(child) for child in ast.walk(node)}
    return inside


def variables_the_code_reads() -> tuple[dict[str, list[str]], list[str]]:
    """{variable: [file:line, ...]} and the reads whose name is not a literal (which no test could check)."""
    found: dict[str, list[str]] = {}
    dynamic = []
    for path in app_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        exempt = helper_bodies(tree)
        for node, name in environment_reads(tree):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                found.setdefault(name.value, []).append(where)
            elif id(node) not in exempt:
                dynamic.append(where)
    return found, dynamic


@pytest.fixture(scope="module")
def code_reads() -> tuple[dict[str, list[str]], list[str]]:
    """The app's environment reads, scanned once for the module (whose tests then run on one xdist worker)."""
    return variables_the_code_reads()


def variables_compose_reads() -> set[str]:
    """${NAME}, ${NAME:-default} and ${NAME:?message} in docker-compose.yml: read from the deployment's .env."""
    return set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (ROOT / "docker-compose.yml").read_text()))


def documented_variables() -> list[str]:
    """The variable of each table row in docs/configuration.md: a first cell that is one `NAME`."""
    names = []
    for line in CONFIGURATION.read_text().splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 2:
            match = re.fullmatch(r"`([A-Z][A-Z0-9_]*)`", cells[1].strip())
            if match:
                names.append(match.group(1))
    return names


def test_it_finds_the_variables_in_every_form_the_code_reads_them():
    """The scanner itself: a form it missed would let an undocumented variable through."""
    tree = ast.parse(
        "import os\n"
        "def envint(name, default):\n    return int(os.getenv(name, default))\n"
        "A = os.getenv('A')\nB = os.environ['B']\nC = os.environ.get('C', '')\nD = envint('D', '1')\n"
        "E = 'E' in os.environ\nos.environ['F'] = 'written, not read'\nos.environ.setdefault('G', 'x')\n"
    )
    exempt = helper_bodies(tree)
    literal = {name.value for node, name in environment_reads(tree) if isinstance(name, ast.Constant)}
    dynamic = [node for node, name in environment_reads(tree) if not isinstance(name, ast.Constant)]
    assert literal == {"A", "B", "C", "D", "E"}
    assert [id(node) in exempt for node in dynamic] == [True]


def test_it_documents_every_environment_variable_the_code_reads(code_reads):
    read, _ = code_reads
    documented = set(documented_variables())
    missing = {name: places for name, places in read.items() if name not in documented}
    missing.update({name: ["docker-compose.yml"] for name in variables_compose_reads() - documented - set(read)})
    assert not missing, "read but not in docs/configuration.md: " + "; ".join(
        f"{name} ({', '.join(places)})" for name, places in sorted(missing.items())
    )


def test_it_documents_no_variable_that_nothing_reads(code_reads):
    read, _ = code_reads
    stale = set(documented_variables()) - set(read) - variables_compose_reads()
    assert not stale, f"in docs/configuration.md but read by no code and not by docker-compose.yml: {sorted(stale)}"


def test_it_documents_each_variable_once():
    names = documented_variables()
    assert len(names) > 40
    assert not {name for name in names if names.count(name) > 1}


# Reads whose name is data, by design: a model endpoint may name the variable that holds its API key, one whose name
# starts with MODEL_API_KEY_ENV_PREFIX (annotator.llm.keys). Exactly these functions, and each must still read
# the environment (or the entry is stale).
NAMED_BY_DATA = {"annotator/llm/keys.py": "endpoint_key"}


def reads_named_by_data() -> set[str]:
    where = set()
    for file, function in NAMED_BY_DATA.items():
        tree = ast.parse((ROOT / file).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == function:
                where |= {f"{file}:{read.lineno}" for read, _ in environment_reads(node)}
    return where


def test_every_environment_read_names_its_variable_literally(code_reads):
    _, dynamic = code_reads
    by_data = reads_named_by_data()
    assert len(by_data) == len(NAMED_BY_DATA), f"NAMED_BY_DATA names a function that reads nothing: {by_data}"
    dynamic = [where for where in dynamic if where not in by_data]
    assert not dynamic, f"environment reads with a computed name (document them and use a literal): {dynamic}"


# --- Links and size ---------------------------------------------------------------------------------------------

MARKDOWN = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def relative_links(text: str) -> list[str]:
    """Targets of markdown links and images, outside code, that are not URLs or anchors on the same page."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = [target for target in LINK.findall(text)]
    return [target for target in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", target)]


def test_it_reads_the_links_of_a_page():
    text = 'See [ops](docs/operations.md#backups), ![shot](img/a.png "t"), [web](https://x.org), [top](#top),\n'
    text += "`[not](a-link.md)`\n```\n[nor](this.md)\n```\n"
    assert relative_links(text) == ["docs/operations.md#backups", "img/a.png"]


def anchors(page: Path) -> set[str]:
    """The ids GitHub gives a page's headings: lowercase, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    headings = re.findall(r"^#+\s+(.+?)\s*$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_it_names_headings_as_github_does(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Similarity (DINOv3)\n## The question rules\n```\n# not a heading\n```\n")
    assert anchors(page) == {"similarity-dinov3", "the-question-rules"}


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file(page):
    assert page.exists()
    broken = []
    for target in relative_links(page.read_text()):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve()
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to files or headings that do not exist: {broken}"


def test_every_page_under_docs_is_linked_from_somewhere():
    linked = set()
    for page in MARKDOWN:
        linked |= {(page.parent / t.split("#")[0]).resolve() for t in relative_links(page.read_text())}
    orphans = [str(page.relative_to(ROOT)) for page in MARKDOWN[2:] if page.resolve() not in linked]
    assert not orphans, f"pages nobody links to: {orphans}"


def test_the_readme_is_at_most_10_kb():
    size = (ROOT / "README.md").stat().st_size
    assert size <= 10_240, f"README.md is {size} bytes: move detail under docs/"
