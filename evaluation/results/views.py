"""The pages that set measurements side by side: a release's page with the studies and runs on it, the runs
compared on a release (paired), the models beside the humans and the items the humans got right and the models
missed. For coordinators."""

from __future__ import annotations

from collections import Counter

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotator.models import CATEGORY_ABBREVIATIONS, Category, Domain, Pair, Release, ReleasePublication
from annotator.releases.services import (
    DIFF_SHOWN,
    release_count_table,
    release_diff_stored,
    release_get,
    release_publication_record,
)
from evaluation.models import Participant, Study
from evaluation.results import beside
from evaluation.results.compare import paired_compare, release_compare, side_choices, side_of
from evaluation.results.study_summary import study_summary
from evaluation.runs.naming import run_names
from evaluation.runs.selectors import release_model_runs_section, release_runs
from evaluation.studies.release_answers import release_studies_section
from evaluation.studies.reports import chart_bars
from evaluation.studies.services import open_url
from evaluation.studies.views import AttentionForm, InviteForm, load_study
from subtlebench.errors import Invalid
from subtlebench.pages import post_only, redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.text import NOTE_MAX, SHORT_TEXT_MAX, single_line

SPLITS = [("test", "test"), ("val", "val")]


class PublishedElsewhereForm(forms.Form):
    when = forms.DateTimeField(
        label="Published elsewhere on", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    where = forms.CharField(max_length=SHORT_TEXT_MAX, required=False, validators=[single_line], label="Where")
    note = forms.CharField(max_length=NOTE_MAX, required=False, label="Note")


@role_required(COORDINATOR)
@require_GET
def release_detail(request, release_name: str):
    release = release_get(release_name)
    diff = release_diff_stored(release=release)
    context = {
        "release": release,
        "publications": release.publications.select_related("who"),
        "published_form": refused_form(request, PublishedElsewhereForm),
        "table": release_count_table(release),
        "diff": diff,
        "shown": DIFF_SHOWN,
        "left_out_count": len(release.left_out),
        "release_links": [*release_studies_section(release), *release_model_runs_section(release)],
        "training_sets": release.training_sets.all(),
    }
    return render(request, "releases/detail.html", context)


@role_required(COORDINATOR)
@post_only("release-detail")
def release_mark_public(request, release_name: str):
    """Record by hand that the release's files were published elsewhere (who, when, where): from then on its items
    count as public, and a study drawn on them is open book."""
    release = release_get(release_name)
    back = reverse("release-detail", args=[release])
    form = PublishedElsewhereForm(request.POST)
    if not form.is_valid():
        return redirect_refused_form(request, back, form)
    try:
        release_publication_record(
            release=release, how=ReleasePublication.How.BY_HAND, who=request.user, **form.cleaned_data
        )
    except Invalid as error:
        return redirect_refused_form(request, back, form, error)
    messages.success(request, f"Release {release.name} marked public since {form.cleaned_data['when']:%Y-%m-%d %H:%M}.")
    return redirect(back)


# --- The runs compared on a release ------------------------------------------------------------------------------


class CompareForm(forms.Form):
    release = forms.ModelChoiceField(queryset=Release.objects.all(), required=False, empty_label=None)
    split = forms.ChoiceField(choices=SPLITS, required=False)
    run = forms.TypedMultipleChoiceField(coerce=int, required=False, label="Runs")
    # Paired comparison (issue 28): two sides on the same items, McNemar's test and the paired difference.
    a = forms.ChoiceField(required=False, label="A")
    b = forms.ChoiceField(required=False, label="B")

    def __init__(self, *args, runs=(), labels=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].choices = [(run.pk, (labels or {}).get(run.pk, run.model_name)) for run in runs]
        sides = [("", "—")] + side_choices(runs, {run.pk: (labels or {}).get(run.pk, run.model_name) for run in runs})
        self.fields["a"].choices = self.fields["b"].choices = sides
        self.fields["release"].label_from_instance = lambda release: f"{release.name} · {release.item_count} items"

    def clean(self):
        data = super().clean()
        if bool(data.get("a")) != bool(data.get("b")) or (data.get("a") and data.get("a") == data.get("b")):
            raise forms.ValidationError("A paired comparison needs two different sides, A and B.")
        return data


@role_required(COORDINATOR)
@require_GET
def model_compare(request):
    """The one compare page (/models/compare/, and /studies/models/ for the part beside the humans): a release's runs
    side by side on the items every chosen run answered, two sides paired on the same items (runs, or the humans),
    and every model beside the humans of one study or of all. The humans are scored by the one rule
    (evaluation.studies.accuracy) in each part."""
    release = None
    if request.GET.get("release"):
        release = (
            Release.objects.filter(pk=request.GET["release"]).first() if request.GET["release"].isdigit() else None
        )
    release = release or Release.objects.first()  # the benchmark's latest
    chosen_runs = list(release_runs(release)) if release else []
    labels = run_names(chosen_runs)
    form = CompareForm(request.GET or None, runs=chosen_runs, labels=labels, initial={"release": release})
    filters, chosen = _model_filters(request)
    context = {"form": form, "filters": filters, "table": None, "release": release, "paired": None, "models": []}
    if (request.GET and not form.is_valid()) or chosen is None:
        return render(request, "modeleval/compare.html", context, status=400)
    data = form.cleaned_data if request.GET else {}
    split = data.get("split") or "test"
    if release is not None:
        context["table"] = release_compare(release=release, run_ids=data.get("run") or None, split=split)
        if data.get("a") and data.get("b"):
            paired = paired_compare(side_of(release, data["a"], split), side_of(release, data["b"], split))
            names = dict(form.fields["a"].choices)
            context["paired"] = paired | {"label_a": names[data["a"]], "label_b": names[data["b"]]}
    context["study"] = chosen["study"]
    context["models"] = beside.models_overview(chosen["study"])["models"]
    return render(request, "modeleval/compare.html", context)


# --- A study's dashboard, with the models beside its humans ---


@role_required(COORDINATOR)
@require_GET
def study_detail(request, pk):
    study = load_study(pk)
    results = study_summary(study)
    accuracy = results["accuracy"]
    category_rows = [
        {"name": c, "abbr": CATEGORY_ABBREVIATIONS[c], "stats": accuracy["categories"].get(c)} for c in Category.values
    ]
    context = {
        "study": study,
        "active_sessions": Participant.objects.filter(study=study).active().count(),
        "devices": sorted(Counter(p["device_class"] for p in results["participants"] if p["device_class"]).items()),
        "r": results,
        "category_rows": category_rows,
        "domain_rows": [{"name": d, "stats": s} for d, s in accuracy["domains"].items()],
        "chart": chart_bars(accuracy["categories"], accuracy["micro"], accuracy["macro"]),
        "open_url": open_url(study) if study.open_cap else "",
        "invite_form": InviteForm(initial={"count": 5}),
        "attention_form": AttentionForm(),
        "attention_items": study.items.attention(),
        "too_fast_seconds": settings.STUDY_TOO_FAST_SECONDS,
        "session_seconds_per_item": settings.STUDY_SESSION_MIN_SECONDS_PER_ITEM,
        "abandoned": Participant.objects.filter(study=study).abandoned().count(),
        "lease_minutes": settings.STUDY_LEASE_MINUTES,
    }
    if request.htmx:  # the live part polls itself while sessions are active
        return render(request, "evaluation/study_detail.html#study-live", context)
    return render(request, "evaluation/study_detail.html", context)


@role_required(COORDINATOR)
@require_GET
def summary_json(request, pk):
    study = load_study(pk)
    response = JsonResponse(study_summary(study), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-summary.json"'
    return response


# --- Models beside the humans --------------------------------------------------------------------------

MISSES_PER_PAGE = 50


class ModelFilterForm(forms.Form):
    """The filters of /models/compare/ and its per-item view, read from the query string."""

    study = forms.ModelChoiceField(queryset=Study.objects.all(), required=False, empty_label="all studies")
    category = forms.ChoiceField(choices=[("", "any category"), *Category.choices], required=False)
    domain = forms.ChoiceField(choices=[("", "any domain"), *Domain.choices], required=False)
    model = forms.CharField(required=False, max_length=40)


def _model_filters(request) -> tuple[ModelFilterForm, dict | None]:
    """The form and its values; None for the values when the query string is bad (the page shows why, 400)."""
    form = ModelFilterForm(request.GET or None)
    if not request.GET:
        return form, {"study": None, "category": "", "domain": "", "model": ""}
    if not form.is_valid():
        return form, None
    data = form.cleaned_data
    return form, {
        "study": data["study"],
        "category": data["category"],
        "domain": data["domain"],
        "model": data["model"],
    }


@role_required(COORDINATOR)
@require_GET
def model_misses(request):
    """The items the humans got right and the models missed, filtered by category, domain and model; paginated."""
    form, chosen = _model_filters(request)
    if chosen is None:
        context = {"form": form, "page": None, "total": 0, "sources": []}
        return render(request, "evaluation/model_misses.html", context, status=400)
    rows, sources = beside.human_right_model_missed(
        study=chosen["study"], category=chosen["category"], domain=chosen["domain"], model_key=chosen["model"]
    )
    if chosen["model"] and chosen["model"] not in {source.key for source in sources}:
        form.add_error("model", f"no model {chosen['model']!r} has results here.")
        context = {"form": form, "page": None, "total": 0, "sources": sources}
        return render(request, "evaluation/model_misses.html", context, status=400)
    page = Paginator(rows, MISSES_PER_PAGE).get_page(request.GET.get("page"))
    pairs = Pair.objects.in_bulk([row["pair_id"] for row in page.object_list])
    for row in page.object_list:
        row["pair"] = pairs.get(row["pair_id"])
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "study": chosen["study"],
        "page": page,
        "total": len(rows),
        "sources": sources,
        "chosen": chosen,
        "query": query.urlencode(),
    }
    return render(request, "evaluation/model_misses.html", context)
