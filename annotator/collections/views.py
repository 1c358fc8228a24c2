"""Pages of image collections: the coordinators' collections page (import form, the collections and their
candidates), and the authoring queue's pages: ask for a candidate pair, its workbench (the pair editor of
annotator/picking/editor.py, with two images in place of a video's frames), the draft beacon and the undo of a skip.
Changes of the workbench go through the API (api/collections.py), as the video workbench's do."""

from __future__ import annotations

import uuid

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Q
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from annotator.authoring.drafts import work_draft_save
from annotator.collections import authoring
from annotator.collections.services import collection_import, source_license_save, source_terms_table
from annotator.collections.uploads import UploadRefused, collection_upload, uploads_refusal
from annotator.jobs.services import clean_idempotency_key
from annotator.lifecycle import collection_pairs
from annotator.models import CandidateSkip, Collection, Domain, Image, Job, PairCandidate, SourceLicense
from annotator.picking.editor import editor_config
from benchmark import jsonlimits
from benchmark.licenses import LICENSE_MAX
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound
from subtlebench.pages import error_response, post_only, redirect_refused_form, refused_form
from subtlebench.roles import ANNOTATOR, COORDINATOR, role_required
from subtlebench.text import NAME_MAX, NOTE_MAX


class ImportForm(forms.Form):
    source = forms.CharField(
        max_length=1000,
        help_text="A folder or CSV/JSONL manifest inside IMPORT_ROOTS (absolute, or relative to an import folder), "
        "or s3://bucket/prefix.",
    )
    name = forms.SlugField(max_length=50, help_text="The source name its pairs export under, e.g. mvtec.")
    domain = forms.ChoiceField(choices=Domain.choices)
    layout = forms.ChoiceField(choices=[("auto", "recognise it"), *Collection.Layout.choices], initial="auto")
    # A fresh key per rendered form: a double submit makes one job.
    idempotency_key = forms.CharField(required=False, widget=forms.HiddenInput, initial=lambda: uuid.uuid4().hex)


@role_required(COORDINATOR)
@require_GET
def collection_list(request):
    """The collections with their images and candidates by status, the recent import jobs, the import form, and the
    terms (license, citation) of every source with a form to record them."""
    collections = Collection.objects.annotate(
        image_count=Count("images", distinct=True),
        open_count=Count("candidates", filter=Q(candidates__status=PairCandidate.Status.OPEN), distinct=True),
        authored_count=Count("candidates", filter=Q(candidates__status=PairCandidate.Status.AUTHORED), distinct=True),
    ).order_by("name", "pk")
    jobs = (
        Job.objects.filter(kind=Job.Kind.IMPORT, result__has_key="collection")
        .select_related("created_by")
        .order_by("-created", "-pk")[:10]
    )
    context = {
        "collections": collections,
        "jobs": jobs,
        "form": refused_form(request, ImportForm),
        "upload_form": UploadForm(),
        "upload": {
            "refusal": uploads_refusal(),
            "max_bytes": settings.COLLECTION_UPLOAD_MAX_BYTES,
            "max_files": settings.COLLECTION_UPLOAD_MAX_FILES,
        },
        "sources": source_terms_table(),
        "limits": {"license": LICENSE_MAX, "citation": NOTE_MAX, "note": NAME_MAX},
    }
    return render(request, "collections/list.html", context)


@role_required(COORDINATOR)
@post_only("collection-list")
def collection_import_view(request):
    form = ImportForm(request.POST)
    if not form.is_valid():
        return redirect_refused_form(request, reverse("collection-list"), form)
    try:
        fields = dict(form.cleaned_data)
        key = clean_idempotency_key(fields.pop("idempotency_key"))
        job = collection_import(**fields, created_by=request.user, idempotency_key=key)
    except Invalid as error:
        return redirect_refused_form(request, reverse("collection-list"), form, error)
    return redirect("job-detail", job_id=job.pk)


class UploadForm(forms.Form):
    """The upload's fields besides its files (a zip, or a folder's files with their relative `paths`)."""

    name = forms.SlugField(max_length=50, help_text="The source name its pairs export under, e.g. mvtec.")
    domain = forms.ChoiceField(choices=Domain.choices)
    layout = forms.ChoiceField(choices=[("auto", "recognise it"), *Collection.Layout.choices], initial="auto")
    idempotency_key = forms.CharField(required=False, widget=forms.HiddenInput, initial=lambda: uuid.uuid4().hex)


def _upload_refused(request, error: Invalid):
    """The page's script asks for JSON (it shows the message beside the form); a plain form post goes back."""
    if "application/json" in request.headers.get("Accept", ""):
        return error_response(request, error)
    return error_response(request, error, back_to="collection-list")


@role_required(COORDINATOR)
@post_only("collection-list")
def collection_upload_view(request):
    """A zip or a folder from the browser, imported as a collection: the job page next (its address in JSON for
    the page's script, which shows the upload's progress)."""
    length = request.META.get("CONTENT_LENGTH", "")
    limit = settings.COLLECTION_UPLOAD_MAX_BYTES
    if length.isdigit() and int(length) > limit + 1024 * 1024:  # refused before the body is read
        size = int(length)
        message = f"The upload is {size} bytes, over the limit of {limit} bytes (COLLECTION_UPLOAD_MAX_BYTES)."
        return _upload_refused(request, UploadRefused(message))
    form = UploadForm(request.POST)
    if not form.is_valid():
        return _upload_refused(request, Invalid({name: list(errors) for name, errors in form.errors.items()}))
    try:
        fields = dict(form.cleaned_data)
        key = clean_idempotency_key(fields.pop("idempotency_key"))
        job = collection_upload(
            files=request.FILES.getlist("files"),
            paths=request.POST.getlist("paths"),
            **fields,
            created_by=request.user,
            idempotency_key=key,
        )
    except Invalid as error:
        return _upload_refused(request, error)
    url = reverse("job-detail", args=[job.pk])
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"job": job.pk, "url": url})
    return redirect(url)


@role_required(COORDINATOR)
@post_only("collection-list")
def source_license_save_view(request):
    """Record a source's license, citation and note (the form beside each source on the collections page)."""
    fields = {name: request.POST.get(name, "") for name in ("source", "license", "citation", "note")}
    if not fields["source"]:
        return error_response(request, Invalid({"source": ["Choose a source."]}), back_to="collection-list")
    try:
        row = source_license_save(**fields, user=request.user)
    except Invalid as error:
        return error_response(request, error, back_to="collection-list")
    messages.success(request, f"The terms of {row.source} are recorded: its items go out under {row.license}.")
    return redirect("collection-list")


IMAGES_SHOWN = 48
ROWS_SHOWN = 25


@role_required(COORDINATOR)
@require_GET
def collection_detail(request, collection_id: int):
    """One collection: its images, the pairs made of them, its candidate pairs, the terms its items go out under,
    its import history, and its everyday actions (rename, archive, delete: annotator/lifecycle.py)."""
    collection = get_object_or_404(Collection.objects.select_related("created_by"), pk=collection_id)
    images = Image.objects.filter(collection=collection)
    pairs = collection_pairs(collection)
    candidates = collection.candidates.all()
    context = {
        "collection": collection,
        "image_count": images.count(),
        "images": images.order_by("pk")[:IMAGES_SHOWN],
        "labels": list(images.exclude(label="").order_by().values("label").annotate(n=Count("pk")).order_by("label")),
        "pair_counts": dict(pairs.order_by().values_list("status").annotate(n=Count("pk"))),
        "pairs": pairs.select_related("author").order_by("-created", "-pk")[:ROWS_SHOWN],
        "candidate_counts": dict(candidates.order_by().values_list("status").annotate(n=Count("pk"))),
        "candidates": candidates.select_related("pair").order_by("-created", "-pk")[:ROWS_SHOWN],
        "terms": SourceLicense.objects.terms_of([collection.name])[collection.name],
        "recorded": SourceLicense.objects.filter(source=collection.name).first(),
        "jobs": Job.objects.filter(kind=Job.Kind.IMPORT, result__collection=collection.name)
        .select_related("created_by")
        .order_by("-created", "-pk")[:ROWS_SHOWN],
    }
    return render(request, "collections/detail.html", context)


# --- The authoring queue ----------------------------------------------------------------------------------------


@role_required(ANNOTATOR)
@require_GET
def candidate_queue(request):
    """The work page's part on candidate pairs (loaded by htmx): the one held, how many wait, drafts and skips."""
    return render(request, "collections/_work_candidates.html", authoring.candidate_work_context(request.user))


@role_required(ANNOTATOR)
@post_only("picking-work")
def candidate_next(request):
    """Ask for a candidate pair to author, and open it."""
    try:
        candidate = authoring.candidate_lease_next(user=request.user)
    except Conflict as error:
        return error_response(request, error, back_to="picking-work")
    if candidate is None:
        messages.warning(request, "No candidate pair is left for you: every one is leased, skipped or authored.")
        return redirect("picking-work")
    return redirect("candidate-workbench", candidate_id=candidate.pk)


@role_required(ANNOTATOR)
@require_GET
def candidate_workbench(request, candidate_id: int):
    """The pair editor on one candidate: its two images are frames A and B, set from the start."""
    candidate = get_object_or_404(
        PairCandidate.objects.select_related("lease_holder", "image_1", "image_2", "collection"), pk=candidate_id
    )
    now = timezone.now()
    elsewhere = PairCandidate.objects.held_by(request.user, now).exclude(pk=candidate.pk).first()
    holder = candidate.holder_now(now)
    now_held = holder is not None and holder.pk == request.user.pk
    lease = {
        "held": now_held,
        "leased_to": holder.username if holder is not None and not now_held else "",
        "held_elsewhere": {"id": elsewhere.pk, "title": elsewhere.title} if elsewhere else None,
        "skip_reasons": [{"value": value, "label": label} for value, label in CandidateSkip.Reason.choices],
        # An authored candidate is out of the queue: its page is open to fix the pair made of it, with no lease to keep.
        "heartbeat": candidate.status == PairCandidate.Status.OPEN,
    }
    source = authoring.CandidateSource(candidate)
    config = editor_config(source, user=request.user, lease=lease, edit=request.GET.get("pair", ""))
    context = {"page": source.page(), "config": config, "candidate_elsewhere": elsewhere, "suggestions": False}
    return render(request, "picking/workbench.html", context)


@role_required(ANNOTATOR)
@post_only("picking-work")
def candidate_draft_beacon(request, candidate_id: int):
    """The workbench's last save as its page goes away: as the video workbench's beacon (a form post)."""
    candidate = get_object_or_404(PairCandidate, pk=candidate_id)
    try:
        version = request.POST.get("version", "")
        if version and not version.isdigit():
            raise Invalid({"version": ["Send the draft version as a whole number."]})
        try:
            state = jsonlimits.loads(request.POST.get("state", ""))
        except ValueError:
            raise Invalid({"state": ["The draft must be a JSON object."]}) from None
        saved = work_draft_save(
            authoring.CANDIDATES,
            item=candidate,
            user=request.user,
            state=state,
            version=int(version) if version else None,
        )
    except (Invalid, Conflict) as error:
        return error_response(request, error)
    return JsonResponse({"version": saved.version, "updated": saved.updated.isoformat()})


@role_required(ANNOTATOR, COORDINATOR)
@post_only("picking-work")
def candidate_skip_undo(request, skip_id: int):
    try:
        candidate = authoring.candidate_skip_undo(skip_id=skip_id, user=request.user)
    except (NotFound, Forbidden) as error:
        return error_response(request, error, back_to="picking-work")
    messages.success(request, f"Skip undone: candidate pair {candidate.title} is offered to you again.")
    return redirect("picking-work")
