"""Coordinator pages of human-baseline studies: the list, the dashboard, invites, attention checks, the models
beside the humans (the models' own pages are evaluation.runs's, under /models/)."""

from __future__ import annotations

import io

from django import forms
from django.contrib import messages
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotator.models import Category, Domain, Release
from annotator.releases.services import release_parse_name
from evaluation.models import DEFAULT_CONSENT, DEFAULT_INSTRUCTIONS, DEFAULT_WITHDRAWAL, Study, StudyItem
from evaluation.studies import reports
from evaluation.studies import services as studies
from evaluation.studies.participation import PROLIFIC_PARAMETERS
from evaluation.studies.sampling import ROUNDING_RULE
from evaluation.studies.services import NO_RELEASE
from subtlebench.errors import Conflict, Invalid
from subtlebench.pages import error_response, post_only, redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.spreadsheet_csv import SafeCsvWriter, csv_download
from subtlebench.text import NAME_MAX, PAGE_TEXT_MAX, single_line

# The study's integer columns hold 32 bits: a larger seed would fail the INSERT.
SEED_BOUND = 2**31 - 1


class ReleaseChoiceField(forms.ModelChoiceField):
    """A release chosen by its name (`v3`, `exp-2`; a plain number names the benchmark's): numbers alone repeat
    across the benchmark's releases and the experiments."""

    def prepare_value(self, value):
        return value.name if isinstance(value, Release) else value

    def to_python(self, value):
        if value in self.empty_values:
            return None
        parsed = release_parse_name(str(value))
        release = self.queryset.filter(number=parsed[0], experiment=parsed[1]).first() if parsed else None
        if release is None:
            raise forms.ValidationError(self.error_messages["invalid_choice"], code="invalid_choice")
        return release


class StudyForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX, validators=[single_line])
    fraction = forms.FloatField(initial=0.1, min_value=0.001, max_value=1)
    seed = forms.IntegerField(initial=0, min_value=-SEED_BOUND, max_value=SEED_BOUND)
    raters_per_item = forms.IntegerField(initial=1, min_value=1, max_value=20, label="Raters per item")
    categories = forms.MultipleChoiceField(
        choices=Category.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    domains = forms.MultipleChoiceField(choices=Domain.choices, required=False, widget=forms.CheckboxSelectMultiple)
    release = ReleaseChoiceField(
        queryset=Release.objects.all(),
        empty_label=None,
        label="Release",
        error_messages={"required": NO_RELEASE, "invalid_choice": "choose one of the releases listed."},
    )
    split = forms.ChoiceField(choices=[("test", "test"), ("val", "val")], initial="test", required=False, label="Split")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["release"].initial = Release.objects.first()  # the benchmark's latest

    def clean_split(self):
        return self.cleaned_data["split"] or "test"

    practice_count = forms.IntegerField(initial=3, min_value=0, max_value=20, label="Practice items")
    items_per_participant = forms.IntegerField(initial=0, min_value=0, max_value=100000, label="Items each (0: all)")
    invites = forms.IntegerField(initial=1, min_value=0, max_value=studies.INVITES_MAX, label="Invite links")
    open_cap = forms.IntegerField(initial=0, min_value=0, max_value=100000, label="Open-link cap (0: none)")
    redirect_url = forms.URLField(required=False, max_length=200, assume_scheme="https", label="Redirect URL when done")
    session_minutes = forms.IntegerField(
        initial=60, min_value=1, max_value=10080, required=False, label="Time limit, min"
    )

    def clean_session_minutes(self):
        value = self.cleaned_data["session_minutes"]
        return 60 if value is None else value

    no_items_url = forms.URLField(
        required=False, max_length=200, assume_scheme="https", label="Return URL when no items are left"
    )
    screen_out_after_wrong_checks = forms.IntegerField(
        initial=0,
        min_value=0,
        max_value=100,
        required=False,
        label="Screen out after wrong checks (0: never)",
        help_text="Attention checks answered wrong that end a session with the screen-out code.",
    )

    def clean_screen_out_after_wrong_checks(self):
        return self.cleaned_data["screen_out_after_wrong_checks"] or 0

    open_book = forms.BooleanField(
        required=False,
        label="Open book: run it even if items are already public",
        help_text="Items a published release holds can be looked up by their pixels: a study on them is refused "
        "unless chosen here, and is then labelled open book wherever its results are shown.",
    )

    show_guidelines = forms.BooleanField(
        required=False,
        label="Show the guidelines: each item's category guideline (its text) under the question",
        help_text="The guidelines coordinators write for annotators (/guidelines/); they may name the category.",
    )

    # Each field once, in the row it belongs to: the page renders these rows and nothing else.
    ROWS = (
        ("name", "release", "split"),
        ("fraction", "seed", "raters_per_item"),
        ("practice_count", "items_per_participant", "invites"),
        ("open_cap", "session_minutes", "screen_out_after_wrong_checks"),
        ("redirect_url", "no_items_url"),
        ("open_book", "show_guidelines"),
    )

    def rows(self):
        return [[self[name] for name in row] for row in self.ROWS]

    # What participants see (issue 12): the smallest window admitted, and the texts of the first page.
    min_viewport_width = forms.IntegerField(
        initial=Study._meta.get_field("min_viewport_width").default,
        min_value=0,
        max_value=10000,
        required=False,
        label="Smallest window width, px (0: any)",
    )
    min_viewport_height = forms.IntegerField(
        initial=0, min_value=0, max_value=10000, required=False, label="Smallest window height, px (0: any)"
    )
    expected_minutes = forms.IntegerField(
        initial=15, min_value=1, max_value=600, required=False, label="Length, minutes"
    )
    contact = forms.CharField(
        max_length=200,
        validators=[single_line],
        required=False,
        label="Contact for questions",
        widget=forms.TextInput(attrs={"placeholder": "e.g. study-team@example.org"}),
    )
    instructions_text = forms.CharField(
        max_length=PAGE_TEXT_MAX,
        initial=DEFAULT_INSTRUCTIONS,
        required=False,
        label="Instructions",
        widget=forms.Textarea(attrs={"rows": 4}),
    )
    consent_text = forms.CharField(
        max_length=PAGE_TEXT_MAX,
        initial=DEFAULT_CONSENT,
        required=False,
        label="Consent",
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    withdrawal_text = forms.CharField(
        max_length=PAGE_TEXT_MAX,
        initial=DEFAULT_WITHDRAWAL,
        required=False,
        label="Withdrawal",
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class InviteForm(forms.Form):
    count = forms.IntegerField(min_value=1, max_value=studies.INVITES_MAX)


class AttentionForm(forms.Form):
    pair_ids = forms.CharField(
        max_length=10000,
        label="Pair ids, separated by spaces or commas",
        widget=forms.TextInput(attrs={"placeholder": "Accepted pair ids outside the sample, e.g. 12 40"}),
    )

    def clean_pair_ids(self):
        raw = self.cleaned_data["pair_ids"].replace(",", " ").split()
        if not raw or not all(part.isdigit() for part in raw):
            raise forms.ValidationError("Give pair ids as whole numbers, e.g. 12 40 51.")
        return [int(part) for part in raw]


def load_study(pk: int) -> Study:
    return get_object_or_404(Study.objects.select_related("release"), pk=pk)


def _study_list_page(request, form: StudyForm, status: int = 200):
    study_rows = Study.objects.select_related("release").annotate(
        scored=Count("items", filter=Q(items__kind=StudyItem.Kind.SCORED), distinct=True),
        people=Count("participants", distinct=True),
        finished=Count("participants", filter=Q(participants__finished_at__isnull=False), distinct=True),
    )
    context = {"studies": study_rows, "form": form, "rule": ROUNDING_RULE, "has_release": Release.objects.exists()}
    return render(request, "evaluation/study_list.html", context, status=status)


@role_required(COORDINATOR)
@require_GET
def study_list(request):
    return _study_list_page(request, refused_form(request, StudyForm))


@role_required(COORDINATOR)
@post_only("study-list")
def study_create(request):
    form = StudyForm(request.POST)
    if not form.is_valid():
        return redirect_refused_form(request, reverse("study-list"), form)
    try:
        study = studies.study_create(**form.cleaned_data, created_by=request.user)
    except Invalid as error:
        return redirect_refused_form(request, reverse("study-list"), form, error)
    messages.success(request, f"Study drawn: {study.items.scored().count()} items from a pool of {study.pool_size}.")
    invites = form.cleaned_data["invites"]
    admitted = studies.participants_admitted(
        items=study.items.scored().count(),
        raters_per_item=study.raters_per_item,
        items_per_participant=study.items_per_participant,
    )
    if invites > admitted:
        messages.warning(
            request,
            f"{invites} invite links, but the study admits {admitted} participant{'s' if admitted != 1 else ''}: "
            f"{invites - admitted} link{'s' if invites - admitted != 1 else ''} will find nothing left.",
        )
    public = reports.public_items(study)
    if public["warning"]:  # told before the first participant is invited, and on the dashboard from then on
        messages.warning(request, public["warning"])
    return redirect("study-detail", study.pk)


PLAN_FIELDS = (
    "release",
    "split",
    "fraction",
    "seed",
    "categories",
    "domains",
    "raters_per_item",
    "items_per_participant",
    "invites",
)


@role_required(COORDINATOR)
@require_GET
def study_plan(request):
    """The new-study form's live summary (htmx): how many items the settings draw and how many participants they
    admit, with a warning when the invite links outnumber them. Fields not (yet) valid leave the summary out."""
    form = StudyForm(request.GET)
    form.is_valid()
    data = form.cleaned_data
    plan = None
    if all(name in data for name in PLAN_FIELDS):
        plan = studies.study_plan(**{name: data[name] for name in PLAN_FIELDS})
        plan["raters_per_item"], plan["items_per_participant"] = data["raters_per_item"], data["items_per_participant"]
    return render(request, "evaluation/_study_plan.html", {"plan": plan})


@role_required(COORDINATOR)
@require_GET
def invite_list(request, pk):
    """The study's invite links (each with a copy button, all in a CSV), its open link and the Prolific URL to paste."""
    study = load_study(pk)
    can_serve = study.has_items_for()
    rows = _invite_rows(study, can_serve)
    open_url = studies.open_url(study) if study.open_cap else ""
    context = {
        "study": study,
        "rows": rows,
        "form": InviteForm(initial={"count": 5}),
        "can_serve": can_serve,
        "full": study.is_full(),
        "usable": sum(1 for row in rows if row["usable"]),
        "admits": study_admits(study),
        "open_url": open_url,
        "prolific_url": open_url + PROLIFIC_URL_PARAMETERS if open_url else "",
        "prolific_parameters": PROLIFIC_URL_PARAMETERS,
        "all_links": "\n".join(row["url"] for row in rows if row["usable"]),
    }
    return render(request, "evaluation/invites.html", context)


# What Prolific's "study URL" field takes: Prolific fills in these placeholders for each participant, and the
# participant pages keep them (evaluation/studies/participation.py PROLIFIC_PARAMETERS).
# "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}".
PROLIFIC_URL_PARAMETERS = "?" + "&".join(f"{name}={{{{%{name}%}}}}" for name in PROLIFIC_PARAMETERS)


def study_admits(study: Study) -> int:
    """How many participants the study's items admit (each item its raters, each participant their items)."""
    return studies.participants_admitted(
        items=study.items.scored().count(),
        raters_per_item=study.raters_per_item,
        items_per_participant=study.items_per_participant,
    )


def _invite_rows(study: Study, can_serve: bool) -> list[dict]:
    """Each link with its state. Unused links are usable only while places are left: the study admits so many
    participants (study_admits), less those who started; the links past that, oldest first, find nothing left."""
    participants = list(study.participants.order_by("created", "pk"))
    rows = [{"p": p, "url": studies.invite_url(p), **_link_state(p, can_serve)} for p in participants]
    started = sum(1 for p in participants if p.consented_at and p.stage in ("practice", "scored", "finished"))
    places = max(0, study_admits(study) - started)
    for row in rows:
        if row["state"] == "unused":
            if places > 0:
                places -= 1
            else:
                row.update(usable=False, state="no place left")
    return rows


@role_required(COORDINATOR)
@require_GET
def invite_csv(request, pk):
    """The invite links as a spreadsheet: id, link, state (as the invites page says it), whether it can be used."""
    study = load_study(pk)
    out = io.StringIO()
    writer = SafeCsvWriter(out)
    writer.writerow(["id", "link", "state", "can_be_used", "stage"])
    for row in _invite_rows(study, study.has_items_for()):
        writer.writerow([row["p"].pk, row["url"], row["state"], "yes" if row["usable"] else "no", row["p"].stage])
    return csv_download(out.getvalue(), f"study-{study.pk}-invites.csv")


def _link_state(participant, can_serve: bool) -> dict:
    """Whether an invite link can still be used, and why not: what the invites page shows beside each link."""
    stage = participant.stage
    if stage in ("invited", "turned away") and not participant.consented_at:
        if can_serve:
            return {"usable": True, "state": "unused"}
        return {"usable": False, "state": "no items left"}
    if stage in ("practice", "scored"):
        return {"usable": True, "state": "in progress"}
    states = {
        "finished": "used",
        "expired": "expired",
        "turned away": "no items left",
        "screened out": "screened out",
        "returned": "returned",
    }
    return {"usable": False, "state": states[stage]}


@role_required(COORDINATOR)
@post_only("study-invites")
def invite_create(request, pk):
    study = load_study(pk)
    form = InviteForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Invite links: give a count from 1 to {studies.INVITES_MAX}.")
        return redirect("study-invites", study.pk)
    try:
        studies.study_invite(study=study, count=form.cleaned_data["count"])
    except (Invalid, Conflict) as error:
        return error_response(request, error, back_to=reverse("study-invites", args=[study.pk]))
    messages.success(request, f"{form.cleaned_data['count']} invite links added.")
    return redirect("study-invites", study.pk)


@role_required(COORDINATOR)
@post_only("study-detail")
def attention_add(request, pk):
    study = load_study(pk)
    form = AttentionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Attention checks: {form.errors['pair_ids'][0]}")
        return redirect("study-detail", study.pk)
    try:
        added = studies.study_add_attention_checks(study=study, pair_ids=form.cleaned_data["pair_ids"])
    except Invalid as error:
        return error_response(request, error, back_to=reverse("study-detail", args=[study.pk]))
    messages.success(
        request,
        f"{len(added)} attention checks added: served like scored items ({study.raters_per_item} rater"
        f"{'s' if study.raters_per_item != 1 else ''} each), so sessions get them in proportion to their items.",
    )
    return redirect("study-detail", study.pk)


@role_required(COORDINATOR)
@post_only("study-detail")
def release_abandoned(request, pk):
    """Give back the places of sessions that hold one but show no life (ParticipantQuerySet.abandoned)."""
    study = load_study(pk)
    released = studies.study_release_abandoned(study=study)
    messages.success(request, f"{released} abandoned place{'s' if released != 1 else ''} released.")
    return redirect("study-detail", study.pk)


@role_required(COORDINATOR)
@require_GET
def responses_csv(request, pk):
    study = load_study(pk)
    return csv_download(reports.responses_csv(study), f"study-{study.pk}-responses.csv")
