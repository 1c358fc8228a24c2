"""The pages of edit jobs: start one (collection, kind of change, template, models, images) and edit the templates;
a job's page (progress and each image's outcome); the check of an edit (accept, or refuse with the reason)."""

from __future__ import annotations

import uuid

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotator.editing.services import (
    edit_accept,
    edit_job_start,
    edit_next_to_check,
    edit_refuse,
    edit_template,
    edit_template_update,
    edit_templates,
)
from annotator.jobs.services import clean_idempotency_key
from annotator.models import Collection, EditKind, EditTemplate, Image, ImageEdit, Job, ModelEndpoint
from subtlebench.errors import Conflict, Forbidden, Invalid
from subtlebench.pages import error_response, post_only, redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, REVIEWER, role_required

RECENT_JOBS = 10
IMAGES_SHOWN = 120  # images of a collection offered on the start page


class EditJobForm(forms.Form):
    collection = forms.ChoiceField(choices=[])
    kind = forms.ChoiceField(label="Kind of change", choices=EditKind.choices)
    endpoint = forms.ChoiceField(label="Image-editing model", choices=[])
    namer = forms.ChoiceField(label="Object named by", choices=[], required=False)
    object_name = forms.CharField(label="Object", max_length=100, required=False)
    value = forms.CharField(label="Becomes", max_length=100, required=False)
    images = forms.MultipleChoiceField(choices=[], widget=forms.CheckboxSelectMultiple)
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, collection: Collection | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].choices = list(Collection.objects.order_by("name", "pk").values_list("pk", "name"))
        endpoints = list(ModelEndpoint.objects.order_by("name", "pk").values_list("pk", "name"))
        self.fields["endpoint"].choices = [("", "—")] + endpoints
        self.fields["namer"].choices = [("", "by hand (the Object field)")] + endpoints
        self.fields["object_name"].widget.attrs["placeholder"] = "e.g. mug"
        self.fields["value"].widget.attrs["placeholder"] = "e.g. red, open, left"
        if collection is None:  # the one a refused post sent, else the first
            chosen = _int(self.data.get("collection")) if self.is_bound else None
            collection = Collection.objects.filter(pk=chosen).first() if chosen else None
            collection = collection or Collection.objects.order_by("name", "pk").first()
        self.collection = collection
        images = Image.objects.filter(collection=collection).order_by("pk") if collection else Image.objects.none()
        self.image_list = list(images[:IMAGES_SHOWN])
        chosen = set(self.data.getlist("images")) if self.is_bound else set()
        for image in self.image_list:
            image.chosen = str(image.pk) in chosen
        self.fields["images"].choices = [(str(image.pk), image.original_name) for image in self.image_list]
        if collection is not None:
            self.initial.setdefault("collection", str(collection.pk))
        if not self.is_bound:
            self.initial.setdefault("idempotency_key", uuid.uuid4().hex)


class TemplateForm(forms.Form):
    instruction = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=1000)
    question = forms.CharField(max_length=300, required=False)
    answer = forms.CharField(max_length=300, required=False)


def _collection_of(request) -> Collection | None:
    """The collection the page shows (?collection=); None: the form's choice."""
    chosen = _int(request.GET.get("collection"))
    return Collection.objects.filter(pk=chosen).first() if chosen else None


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def edit_jobs_page(request):
    """Start an edit job; the kinds' templates, editable; the latest edit jobs and the edits waiting for a check."""
    if request.method == "POST":
        collection = Collection.objects.filter(pk=_int(request.POST.get("collection"))).first()
        form = EditJobForm(request.POST, collection=collection)
        back = reverse("edit-jobs")  # the refused form's collection comes back with it
        if not form.is_valid():
            return redirect_refused_form(request, back, form)
        data = dict(form.cleaned_data)
        try:
            job = edit_job_start(
                user=request.user,
                collection_id=data["collection"],
                kind=data["kind"],
                endpoint_id=data["endpoint"],
                image_ids=data["images"],
                object_name=data["object_name"],
                value=data["value"],
                namer_id=data["namer"] or None,
                key=clean_idempotency_key(data["idempotency_key"]),
            )
        except Invalid as error:
            return redirect_refused_form(request, back, form, error)
        messages.success(request, f"Edit job #{job.pk} started.")
        return redirect("edit-job", job_id=job.pk)
    form = refused_form(request, EditJobForm, collection=_collection_of(request))
    collection = form.collection
    jobs = Job.objects.filter(kind=Job.Kind.EDIT).select_related("created_by").order_by("-created", "-pk")
    templates = [(template, TemplateForm(initial=_template_initial(template))) for template in edit_templates()]
    context = {
        "form": form,
        "collection": collection,
        "templates": templates,
        "jobs": list(jobs[:RECENT_JOBS]),
        "to_check": ImageEdit.objects.to_check().count(),
    }
    return render(request, "editing/start.html", context)


def _template_initial(template: EditTemplate) -> dict:
    return {"instruction": template.instruction, "question": template.question, "answer": template.answer}


def _int(value) -> int | None:
    text = str(value or "").strip()
    return int(text) if text.isdigit() and len(text) < 18 else None


@role_required(COORDINATOR)
@post_only("edit-jobs")
def edit_template_save(request, kind):
    template = edit_template(kind)
    if template is None:
        raise Http404(f"No kind of edit {kind!r}.")
    form = TemplateForm(request.POST)
    back = reverse("edit-jobs") + "#templates"
    if not form.is_valid():
        messages.error(request, f"The {template.get_kind_display()} template was not saved: {form.errors.as_text()}")
        return redirect(back)
    try:
        edit_template_update(user=request.user, template=template, **form.cleaned_data)
    except Invalid as error:
        return error_response(request, error, back_to=back)
    messages.success(request, f"The {template.get_kind_display()} template is saved; jobs started from now use it.")
    return redirect(back)


@role_required(COORDINATOR)
@require_GET
def edit_job_page(request, job_id):
    """The job's progress (polled while it runs) and each image's outcome."""
    job = get_object_or_404(Job, pk=job_id, kind=Job.Kind.EDIT)
    edits = ImageEdit.objects.filter(job=job).select_related("image", "edited_image", "checked_by").order_by("pk")
    page = Paginator(edits, 100).get_page(request.GET.get("page"))
    counts = {status: 0 for status in ImageEdit.Status.values}
    for status in ImageEdit.objects.filter(job=job).values_list("status", flat=True):
        counts[status] += 1
    context = {"job": job, "page": page, "counts": counts}
    if request.htmx:
        return render(request, "editing/job.html#edit-job-status", context)
    return render(request, "editing/job.html", context)


@role_required(REVIEWER, COORDINATOR)
@require_GET
def edit_check_next(request):
    """The oldest edit waiting for a check, or a page that says none waits."""
    edit = edit_next_to_check()
    if edit is None:
        return render(request, "editing/check.html", {"edit": None})
    return redirect("edit-check", edit_id=edit.pk)


@role_required(REVIEWER, COORDINATOR)
@require_GET
def edit_check(request, edit_id):
    """An edit beside its original, the boxes of the change on both, the instruction; accept or refuse it."""
    edit = get_object_or_404(
        ImageEdit.objects.select_related("image", "edited_image", "candidate", "job", "checked_by"), pk=edit_id
    )
    regions = edit.candidate.regions if edit.candidate else []
    context = {
        "edit": edit,
        "boxes_1": _boxes(regions, 1, edit.image),
        "boxes_2": _boxes(regions, 2, edit.image),
        "reasons": ImageEdit.RefuseReason.choices,
        "waiting": ImageEdit.objects.to_check().count(),
    }
    return render(request, "editing/check.html", context)


def _boxes(regions: list[dict], image: int, on: Image) -> list[dict]:
    """Regions as percentages of the image, for boxes drawn over it in CSS."""
    return [
        {
            "left": 100 * r["x"] / on.width,
            "top": 100 * r["y"] / on.height,
            "width": 100 * r["w"] / on.width,
            "height": 100 * r["h"] / on.height,
        }
        for r in regions
        if r["image"] == image
    ]


@role_required(REVIEWER, COORDINATOR)
@post_only("edit-check")
def edit_accept_view(request, edit_id):
    edit = get_object_or_404(ImageEdit, pk=edit_id)
    try:
        edit_accept(user=request.user, edit=edit)
    except (Conflict, Forbidden) as error:
        return error_response(request, error, back_to=reverse("edit-check", args=[edit.pk]))
    messages.success(request, f"Edit {edit.pk} accepted: its pair waits in the authoring queue.")
    return redirect("edit-check-next")


@role_required(REVIEWER, COORDINATOR)
@post_only("edit-check")
def edit_refuse_view(request, edit_id):
    edit = get_object_or_404(ImageEdit, pk=edit_id)
    try:
        edit_refuse(
            user=request.user, edit=edit, reason=request.POST.get("reason", ""), note=request.POST.get("note", "")
        )
    except (Conflict, Forbidden, Invalid) as error:
        return error_response(request, error, back_to=reverse("edit-check", args=[edit.pk]))
    messages.success(request, f"Edit {edit.pk} refused; it is kept with the reason.")
    return redirect("edit-check-next")
