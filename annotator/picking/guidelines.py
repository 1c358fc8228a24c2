"""Guidelines for pairs per category and domain: writing a new version, example pairs (accepted ones, good or bad, with
a note), the version in force for a pair, and the Markdown they are written in, rendered safely (every character of
the text is escaped first: HTML in a guideline shows as text)."""

from __future__ import annotations

import re

from django.core.files.storage import default_storage
from django.db import transaction
from django.utils.html import escape

from annotator.models import Category, Domain, Guideline, GuidelineExample, GuidelineVersion, Pair
from annotator.models.guidelines import EXAMPLE_NOTE_MAX, GUIDELINE_BODY_MAX
from subtlebench.errors import Invalid, NotFound

# --- Markdown: a small, safe subset (headings, lists, paragraphs, code, bold, italics, links) -------------------------

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]]+)\]\(((?:https?://|/(?!/))[^)\s]*)\)")


def _inline(text: str) -> str:
    """One line, already escaped: code spans first (nothing inside them is markup), then links, bold, italics."""
    parts = _CODE.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{part}</code>")
            continue
        part = _LINK.sub(r'<a href="\2" rel="noopener noreferrer">\1</a>', part)
        part = _BOLD.sub(r"<strong>\1</strong>", part)
        part = _ITALIC.sub(r"<em>\1</em>", part)
        out.append(part)
    return "".join(out)


def markdown_html(text: str) -> str:
    """The guideline's Markdown as HTML. The whole text is escaped before any markup is added, and links take only
    http(s) or site-relative addresses, so nothing a writer types can run or inject HTML. The templates that show it
    mark it safe (reviewed in tests/site/test_names_are_text.py)."""
    html: list[str] = []
    paragraph: list[str] = []
    list_tag = None
    code: list[str] | None = None

    def close_paragraph():
        if paragraph:
            html.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()

    def close_list():
        nonlocal list_tag
        if list_tag:
            html.append(f"</{list_tag}>")
            list_tag = None

    for raw in escape(text).replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        if code is not None:
            if line.strip().startswith("```"):
                html.append(f"<pre><code>{chr(10).join(code)}</code></pre>")
                code = None
            else:
                code.append(raw)
            continue
        if line.strip().startswith("```"):
            close_paragraph()
            close_list()
            code = []
            continue
        heading = re.match(r"(#{1,3})\s+(.*)", line)
        item = re.match(r"\s*(?:([-*])|(\d+)[.)])\s+(.*)", line)
        if not line.strip():
            close_paragraph()
            close_list()
        elif heading:
            close_paragraph()
            close_list()
            level = len(heading[1]) + 3  # h4-h6: a guideline sits inside a page
            html.append(f"<h{level}>{_inline(heading[2])}</h{level}>")
        elif item:
            close_paragraph()
            tag = "ul" if item[1] else "ol"
            if list_tag != tag:
                close_list()
                html.append(f"<{tag}>")
                list_tag = tag
            html.append(f"<li>{_inline(item[3])}</li>")
        else:
            if list_tag and raw.startswith((" ", "\t")) and html[-1].endswith("</li>"):
                html[-1] = html[-1][: -len("</li>")] + " " + _inline(line.strip()) + "</li>"
                continue
            close_list()
            paragraph.append(line.strip())
    if code is not None:
        html.append(f"<pre><code>{chr(10).join(code)}</code></pre>")
    close_paragraph()
    close_list()
    return "\n".join(html)


# --- Services --------------------------------------------------------------------------------------------------------


def _check_scope(category: str, domain: str) -> None:
    if category not in Category.values:
        raise Invalid({"category": [f"Pick a category: {category!r} is not one."]})
    if domain and domain not in Domain.values:
        raise Invalid({"domain": [f"Pick a domain, or every domain: {domain!r} is not one."]})


def guideline_in_force(*, category: str, domain: str) -> GuidelineVersion | None:
    """The version a pair of this category and domain follows now: the latest of the domain's own guideline, else of
    the category's guideline for every domain; None when neither is written."""
    guideline = Guideline.objects.for_pair(category=category, domain=domain).first()
    return guideline.current if guideline is not None else None


@transaction.atomic
def guideline_save(*, category: str, domain: str, body: str, user) -> GuidelineVersion:
    """Write a new version of the guideline of a category and domain ("" for every domain): each edit is kept."""
    _check_scope(category, domain)
    body = (body or "").replace("\r\n", "\n").strip()
    if not body:
        raise Invalid({"body": ["Write the guideline: it is empty."]})
    if len(body) > GUIDELINE_BODY_MAX:
        raise Invalid(
            {"body": [f"The guideline is {len(body)} characters long, over the limit of {GUIDELINE_BODY_MAX}."]}
        )
    guideline, _ = Guideline.objects.get_or_create(category=category, domain=domain)
    guideline = Guideline.objects.select_for_update().get(pk=guideline.pk)
    current = guideline.current
    if current is not None and current.body == body:
        raise Invalid({"body": [f"Nothing changed: version {current.number} says exactly this."]})
    return GuidelineVersion.objects.create(
        guideline=guideline, number=(current.number + 1) if current else 1, body=body, author=user
    )


def guideline_example_add(*, guideline: Guideline, pair_id, kind: str, note: str, user) -> GuidelineExample:
    """Show an accepted pair of the guideline's category (and domain, when it has one) as a good or bad example."""
    if kind not in GuidelineExample.Kind.values:
        raise Invalid({"kind": ["Say whether the example is a good one or a bad one."]})
    note = (note or "").strip()
    if len(note) > EXAMPLE_NOTE_MAX:
        raise Invalid({"note": [f"The note is {len(note)} characters long, over the limit of {EXAMPLE_NOTE_MAX}."]})
    try:
        pair = Pair.objects.get(pk=int(pair_id))
    except (TypeError, ValueError):
        raise Invalid({"pair": [f"Give the number of an accepted pair, not {str(pair_id)[:20]!r}."]}) from None
    except Pair.DoesNotExist:
        raise NotFound(f"Pair {pair_id} does not exist.") from None
    if pair.status != Pair.Status.ACCEPTED:
        raise Invalid({"pair": [f"Pair {pair.pk} is {pair.status}: examples are taken from accepted pairs."]})
    if pair.category != guideline.category or (guideline.domain and pair.domain != guideline.domain):
        raise Invalid(
            {"pair": [f"Pair {pair.pk} is a {pair.category} pair of {pair.domain}: this guideline is for {guideline}."]}
        )
    example, _ = GuidelineExample.objects.update_or_create(
        guideline=guideline, pair=pair, defaults={"kind": kind, "note": note, "added_by": user}
    )
    return example


def guideline_citable(*, pair: Pair, version_id) -> GuidelineVersion | None:
    """The guideline version a rejection of the pair cites (None for none): one of its category's guidelines (the
    pair's domain or every domain); Invalid otherwise."""
    if version_id in (None, ""):
        return None
    version = GuidelineVersion.objects.select_related("guideline").filter(pk=version_id).first()
    if (
        version is None
        or version.guideline.category != pair.category
        or version.guideline.domain not in ("", pair.domain)
    ):
        raise Invalid(
            {"guideline_version": [f"Cite a guideline of {pair.category} pairs ({pair.domain} or every domain)."]}
        )
    return version


def _thumb(image) -> str:
    name = image.thumbnail.name or image.file.name
    return default_storage.url(name) if name else ""


def example_rows(guideline: Guideline) -> list[dict]:
    """The guideline's examples, good first, each with its pair and the two images' thumbnails."""
    examples = sorted(
        guideline.examples.select_related("pair", "pair__image_1", "pair__image_2").order_by("pk"),
        key=lambda example: example.kind != GuidelineExample.Kind.GOOD,
    )
    return [
        {
            "pk": example.pk,
            "kind": example.kind,
            "note": example.note,
            "pair": example.pair,
            "thumb_1": _thumb(example.pair.image_1),
            "thumb_2": _thumb(example.pair.image_2),
        }
        for example in examples
    ]


def guideline_panel(*, category: str, domain: str, version: GuidelineVersion | None = None) -> dict:
    """What the panel beside the editor or the review shows: the version (in force, or the given one), its HTML, its
    guideline's examples, and the version in force when a later one exists."""
    in_force = guideline_in_force(category=category, domain=domain) if category in Category.values else None
    shown = version or in_force
    return {
        "category": category,
        "domain": domain,
        "version": shown,
        "html": markdown_html(shown.body) if shown else "",
        "examples": example_rows(shown.guideline) if shown is not None else [],
        "newer": in_force if shown is not None and in_force is not None and in_force.pk != shown.pk else None,
    }
