"""What the pages and guides say matches what the app does: the drafting key is g (m draws regions) wherever
"Draft with a model" is named, the studies guide gives the real default minimum window, no form control is named
after an element method that htmx calls on its form, one table writes its figures in one form, and /api/ itself
speaks to people."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.template.loader import render_to_string

from evaluation.models import Study

ROOT = Path(__file__).resolve().parents[2]
SHADOWING = ("matches", "closest", "getAttribute", "hasAttribute", "querySelector", "contains", "submit")


def sources(*patterns: str) -> list[Path]:
    return sorted(path for pattern in patterns for path in ROOT.glob(pattern))


def test_every_mention_of_draft_with_a_model_gives_the_key_g():
    mentions = 0
    for path in sources("templates/**/*.html", "docs/**/*.md"):
        text = path.read_text()
        for match in re.finditer(r"Draft with a model", text):
            near = text[max(0, match.start() - 40) : match.end() + 40]
            keys = re.findall(r"<kbd>(\w)</kbd>|`(\w)`|\((\w)\)", near)
            named = {next(k for k in key if k) for key in keys}
            assert named <= {"g"}, f"{path.relative_to(ROOT)}: 'Draft with a model' beside the key(s) {named}"
            mentions += bool(named)
    assert mentions >= 4
    keys_table = (ROOT / "docs/guides/picking.md").read_text()
    assert re.search(r"^\| `g` \| \*\*Draft with a model\*\*", keys_table, re.M), "the picking guide's keys list g"


def test_the_studies_guide_gives_the_default_minimum_window():
    default = Study._meta.get_field("min_viewport_width").default
    guide = (ROOT / "docs/guides/studies.md").read_text()
    said = re.findall(r"minimum \(default (\d+) px wide", guide)
    assert said == [str(default)], f"the guide says {said}, the default is {default}"


def test_no_form_control_is_named_after_an_element_method():
    for path in sources("templates/**/*.html"):
        for name in re.findall(r'\bname="(\w+)"', path.read_text()):
            assert name not in SHADOWING, f"{path.relative_to(ROOT)}: a control named {name!r} hides form.{name}()"


def test_the_paired_table_writes_differences_in_points_beside_percentages():
    row = {
        "name": "temporal",
        "n": 10,
        "a": {"accuracy": 0.5},
        "b": {"accuracy": 0.3},
        "difference": 0.2,
        "low": -0.05,
        "high": 0.45,
        "a_only": 3,
        "b_only": 1,
        "method": "exact",
        "statistic": None,
        "p_value": 0.6,
    }
    html = render_to_string("modeleval/_paired_row.html", {"row": row})
    assert "50.0%" in html and "20.0" in html and "-5.0 to 45.0" in html
    assert "0.200" not in html and "0.450" not in html
    compare = (ROOT / "templates/modeleval/compare.html").read_text()
    assert "floatformat:3" not in compare, "AVG beside percentages: one form"


@pytest.mark.django_db
def test_the_api_root_speaks_to_people_and_to_scripts(client_for, annotator):
    client = client_for(annotator)
    page = client.get("/api/", HTTP_ACCEPT="text/html,application/xhtml+xml")
    html = page.content.decode()
    assert page.status_code == 200 and "Make a token" in html and "Read the documentation" in html
    assert "No API endpoint" not in html and "endpoint at /api/" not in html
    data = client.get("/api/", HTTP_ACCEPT="application/json")
    assert data.status_code == 200 and data.json()["docs"] == "/api/docs/"
    assert client.get("/api/nothing-here/").status_code == 404
