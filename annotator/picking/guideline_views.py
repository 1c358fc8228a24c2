"""Pages of guidelines: the coordinators' list and editor (a new version on each save, example pairs), one version as
a page (what a rejection cites), and the panel beside the pair editor and the review (an htmx partial)."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count, Max
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotator.models import Category, Domain, Guideline, GuidelineExample, GuidelineVersion
from annotator.picking import guidelines as service
from subtlebench.errors import Invalid, NotFound, page_detail
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, role_required

EVERY_DOMAIN = "all"  # the address's word for a guideline of every domain (an empty domain)


@role_required(COORDINATOR)
@require_GET
def guideline_list(request):
    """Every guideline with its version in force, how many versions and examples it has; a form to start one."""
    rows = (
        Guideline.objects.annotate(versions_count=Count("versions", distinct=True), latest=Max("versions__number"))
        .annotate(examples_count=Count("examples", distinct=True))
        .order_by("category", "domain", "pk")
    )
    return render(
        request,
        "picking/guidelines.html",
        {"rows": rows, "categories": Category.choices, "domains": Domain.choices, "every": EVERY_DOMAIN},
    )


def _scope(category: str, domain: str) -> tuple[str, str]:
    if category not in Category.values or (domain != EVERY_DOMAIN and domain not in Domain.values):
        raise NotFound(f"No guideline scope {category}/{domain}: pick a category and a domain (or {EVERY_DOMAIN}).")
    return category, "" if domain == EVERY_DOMAIN else domain


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def guideline_edit(request, category: str, domain: str):
    """GET: the guideline of a category and domain, its versions and examples. POST `action`: save (a new version),
    example (add or change an example pair), drop (remove an example)."""
    category, domain_value = _scope(category, domain)
    guideline = Guideline.objects.filter(category=category, domain=domain_value).first()
    body = None
    if request.method == "POST":
        action = request.POST.get("action", "")
        try:
            if action == "save":
                body = request.POST.get("body", "")
                version = service.guideline_save(category=category, domain=domain_value, body=body, user=request.user)
                messages.success(request, f"Saved as version {version.number} of {version.guideline}.")
            elif action in ("example", "drop") and guideline is None:
                raise Invalid({"pair": ["Write the guideline first: examples belong to a guideline."]})
            elif action == "example":
                service.guideline_example_add(
                    guideline=guideline,
                    pair_id=request.POST.get("pair", ""),
                    kind=request.POST.get("kind", ""),
                    note=request.POST.get("note", ""),
                    user=request.user,
                )
                messages.success(request, "Example saved.")
            elif action == "drop":
                GuidelineExample.objects.filter(guideline=guideline, pk=request.POST.get("example") or 0).delete()
                messages.success(request, "Example removed.")
            else:
                raise Invalid({"action": [f"Unknown action {action!r}: save, example or drop."]})
        except (Invalid, NotFound) as error:
            messages.error(request, page_detail(error))
            if action != "save":
                return redirect(request.path)
        else:
            return redirect(request.path)
    current = guideline.current if guideline else None
    context = {
        "category": category,
        "domain": domain_value,
        "domain_slug": domain,
        "guideline": guideline,
        "current": current,
        "body": body if body is not None else (current.body if current else ""),
        "html": service.markdown_html(current.body) if current else "",
        "versions": (
            guideline.versions.select_related("author").annotate(pairs_count=Count("pairs")).order_by("-number")
            if guideline
            else []
        ),
        "examples": service.example_rows(guideline) if guideline else [],
        "kinds": GuidelineExample.Kind.choices,
    }
    return render(request, "picking/guideline_edit.html", context)


@role_required(ANNOTATOR, REVIEWER, COORDINATOR)
@require_GET
def guideline_version(request, version_id: int):
    """One version of a guideline, as it was written (what a pair followed, what a rejection cites)."""
    version = get_object_or_404(GuidelineVersion.objects.select_related("guideline", "author"), pk=version_id)
    panel = service.guideline_panel(
        category=version.guideline.category, domain=version.guideline.domain, version=version
    )
    edit = reverse("guideline-edit", args=[version.guideline.category, version.guideline.domain or EVERY_DOMAIN])
    return render(request, "picking/guideline_version.html", {"version": version, "panel": panel, "edit": edit})


@role_required(ANNOTATOR, REVIEWER, COORDINATOR)
@require_GET
def guideline_panel(request):
    """The panel beside the editor: the guideline in force for ?category= and ?domain= (htmx swaps it in)."""
    category = request.GET.get("category", "")
    domain = request.GET.get("domain", "")
    panel = service.guideline_panel(category=category, domain=domain if domain in Domain.values else "")
    return render(request, "picking/_guideline_panel.html", {"panel": panel})
