"""Names are text: no script of static/js/ hands a string it did not write itself to an HTML parser (innerHTML,
outerHTML, insertAdjacentHTML, document.write), and no template or Python module marks a string safe outside the
reviewed list below. A file name, a collection, a sweep, an endpoint, a model's reply, a caption or a question is
always inserted as text."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "static/js").glob("*.js"))

# `x.innerHTML = <right-hand side>` (or +=), up to the end of the statement.
ASSIGNED_HTML = re.compile(r"\.(innerHTML|outerHTML)\s*\+?=(?!=)\s*(?P<value>[^;]*)")
CALLED_HTML = re.compile(r"\b(insertAdjacentHTML|document\.write(ln)?|createContextualFragment|parseFromString)\s*\(")
# A string literal the script wrote itself: quoted, or a template literal with no ${...} in it.
CONSTANT = re.compile(r"""^\s*("[^"\\]*"|'[^'\\]*'|`[^`$\\]*`)\s*$""")

# Every place a template or a module makes markup safe, with why it is: the test fails on any other.
REVIEWED_SAFE = {
    # The sweep's heat map: SVG drawn by evaluation/results/heatmaps.py, every text escaped there.
    ("templates/synthetic/detail.html", "{{ svg|safe }}"),
    # The report's figure: SVG drawn by benchmark/figure.py, every text escaped there.
    ("templates/evaluation/release_report.html", "{{ figure|safe }}"),
    # The correlation section's figures: SVG drawn by benchmark/correlation_figure.py, every text escaped there.
    ("templates/evaluation/_correlation.html", "{{ c.svg|safe }}"),
    ("templates/evaluation/_correlation.html", "{{ bins_svg|safe }}"),
    # A guideline's Markdown: annotator/picking/guidelines.markdown_html escapes the whole text before any markup.
    ("templates/picking/_guideline_panel.html", "{{ panel.html|safe }}"),
    ("templates/picking/guideline_edit.html", "{{ html|safe }}"),
    ("templates/evaluation/participant/item.html", "{{ guideline|safe }}"),
}
SAFE_IN_TEMPLATE = re.compile(r"\{\{[^}]*\|\s*safe(seq)?\b[^}]*\}\}|\{%\s*autoescape\s+off\s*%\}")
# An empty SafeString("") is nothing to escape; any other is markup made by hand.
SAFE_IN_PYTHON = re.compile(
    r"""\bmark_safe\s*\(|\bSafeString\s*\((?!\s*(""|'')\s*\))|\bSafeText\s*\(|\.__html__\s*=|is_safe\s*=\s*True"""
)


def statements(source: str) -> str:
    """The script with its line breaks inside an expression joined, so a value that goes on on the next line is seen."""
    return re.sub(r"\n\s*(?=[.?:+])", " ", source)


def html_sinks(source: str) -> list[str]:
    found = []
    for match in ASSIGNED_HTML.finditer(statements(source)):
        if not CONSTANT.match(match["value"]):
            found.append(match[0].strip())
    found += [match[0] for match in CALLED_HTML.finditer(source)]
    return found


def test_it_sees_markup_made_from_a_value_and_lets_a_constant_through():
    """The control: the check catches the sinks it is for, however the value is written."""
    assert html_sinks("el.innerHTML = `<b>${name}</b>`;")
    assert html_sinks("el.innerHTML = name;")
    assert html_sinks("el.outerHTML += '<i>' + name;")
    assert html_sinks("el.innerHTML = list\n  .map((x) => x)\n  .join('');")
    assert html_sinks("el.insertAdjacentHTML('beforeend', '<b>');")
    assert html_sinks("document.write(x);")
    assert not html_sinks('el.innerHTML = "";')
    assert not html_sinks("el.innerHTML = '<li>none</li>';")
    assert not html_sinks("el.innerHTML = `<input><button>x</button>`;")
    assert not html_sinks("return span.innerHTML;")
    assert not html_sinks("if (a.innerHTML === b) {}")


def test_no_script_parses_a_string_it_did_not_write():
    offenders = {
        script.relative_to(ROOT).as_posix(): sinks
        for script in SCRIPTS
        if (sinks := html_sinks(script.read_text(encoding="utf-8")))
    }
    assert SCRIPTS and not offenders, offenders


def test_templates_mark_safe_only_what_was_reviewed():
    found = set()
    for template in sorted((ROOT / "templates").rglob("*.html")):
        for match in SAFE_IN_TEMPLATE.finditer(template.read_text(encoding="utf-8")):
            found.add((template.relative_to(ROOT).as_posix(), match[0]))
    assert found <= REVIEWED_SAFE, sorted(found - REVIEWED_SAFE)


def test_python_never_marks_a_string_safe_by_hand():
    """Markup made in Python goes through format_html / format_html_join, which escape every argument."""
    offenders = []
    for package in ("annotator", "api", "benchmark", "demo", "evaluation", "subtlebench"):
        for module in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in module.parts:
                continue
            for number, line in enumerate(module.read_text(encoding="utf-8").splitlines(), 1):
                if SAFE_IN_PYTHON.search(line):
                    offenders.append(f"{module.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders
