"""Pages participants see (no account: the token in the URL is their key). Blinded: no ids, no labels, no answers."""

from __future__ import annotations

import mimetypes

from django.conf import settings
from django.core import signing
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluation import participation, studies
from evaluation.models import Assignment, Participant, Study, StudyItem
from subtlebench.errors import Forbidden, ServiceError
from subtlebench.pages import error_response

IMAGE_SALT = "evaluation.participant-image"


def load_participant(token: str) -> Participant:
    return get_object_or_404(Participant.objects.select_related("study"), token=token)


def image_url(assignment: Assignment, slot: int) -> str:
    """An opaque, expiring URL: a signed (assignment token, slot); the image's name never leaves the server."""
    signed = signing.TimestampSigner(salt=IMAGE_SALT).sign_object({"a": assignment.token, "s": slot})
    return reverse("participant-image", args=[assignment.participant.token, signed])


def item_context(assignment: Assignment) -> dict:
    participant = assignment.participant
    study = participant.study
    return {
        "participant": participant,
        "assignment": assignment,
        "options": participation.shown_options(assignment),
        "question": assignment.item.pair.question,
        "image_1": image_url(assignment, 1),
        "image_2": image_url(assignment, 2),
        "planned": studies.planned_items(study),
        "client_key": participation.new_client_key(),
    }


def stage_url(participant: Participant) -> str:
    name = {
        "invited": "participant-start",
        "practice": "participant-practice",
        "scored": "participant-item",
        "finished": "participant-done",
    }[participant.stage]
    return reverse(name, args=[participant.token])


@require_GET
def open_link(request, open_token):
    study = get_object_or_404(Study, open_token=open_token)
    try:
        participant = participation.participant_join_open(study=study, params=request.GET)
    except Forbidden as error:  # full, or no open link
        return error_response(
            request,
            error,
            page=lambda message: render(request, "evaluation/participant/closed.html", {"message": message}),
        )
    return HttpResponseRedirect(stage_url(participant))


@require_GET
def start(request, token):
    participant = load_participant(token)
    participant.record_url_parameters(request.GET)
    if participant.stage != "invited":
        return redirect(stage_url(participant))
    return render(request, "evaluation/participant/start.html", {"participant": participant})


@require_POST
def consent(request, token):
    participant = load_participant(token)
    if request.POST.get("agree") != "yes":
        return render(
            request,
            "evaluation/participant/start.html",
            {"participant": participant, "error": "Please tick the box to agree before you start."},
            status=400,
        )
    participant.consent()
    return redirect(stage_url(participant))


@require_GET
def practice(request, token):
    participant = load_participant(token)
    if participant.stage == "invited":
        return redirect(stage_url(participant))
    assignment = participation.participant_next_practice(participant=participant)
    if assignment is None and not participant.study.practice_count:
        return redirect("participant-item", token)  # no practice block: straight to the items
    if assignment is None:
        return render(request, "evaluation/participant/practice_done.html", {"participant": participant})
    context = item_context(assignment) | {
        "practice": True,
        "action": reverse("participant-practice-answer", args=[token, assignment.token]),
    }
    return render(request, "evaluation/participant/item.html", context)


@require_POST
def practice_answer(request, token, item_token):
    participant = load_participant(token)
    assignment = get_object_or_404(
        Assignment.objects.select_related("item__pair", "participant__study"),
        participant=participant,
        token=item_token,
        item__kind=StudyItem.Kind.PRACTICE,
    )
    try:
        participation.assignment_answer(
            participant=participant,
            token=item_token,
            position=request.POST.get("option"),
            active_ms=_int_or_none(request.POST.get("active_ms")),
        )
    except ServiceError:  # a stale or repeated form: the practice page shows whatever is current now
        return redirect("participant-practice", token)
    assignment.refresh_from_db()
    options = assignment.item.pair.options
    context = {
        "participant": participant,
        "correct": assignment.correct,
        "answer": options[0],
        "chosen": options[assignment.chosen],
    }
    return render(request, "evaluation/participant/practice_feedback.html", context)


@require_GET
def item(request, token):
    participant = load_participant(token)
    if participant.stage in ("invited", "practice"):
        return redirect(stage_url(participant))
    assignment = participation.participant_next_item(participant=participant)
    if assignment is None:
        participant.refresh_from_db(fields=["finished_at"])
        if participant.finished_at is None:
            return render(request, "evaluation/participant/wait.html", {"participant": participant})
        return redirect("participant-done", token)
    context = item_context(assignment) | {
        "practice": False,
        "action": reverse("participant-answer", args=[token, assignment.token]),
    }
    return render(request, "evaluation/participant/item.html", context)


@require_POST
def answer(request, token, item_token):
    participant = load_participant(token)
    try:
        participation.assignment_answer(
            participant=participant,
            token=item_token,
            position=request.POST.get("option"),
            active_ms=_int_or_none(request.POST.get("active_ms")),
            client_key=(request.POST.get("client_key") or "")[:64] or None,
        )
    except ServiceError:  # a stale or repeated form (or a lost lease): the item page shows whatever is current now
        pass
    return redirect("participant-item", token)


@require_GET
def done(request, token):
    participant = load_participant(token)
    if participant.stage != "finished":
        return redirect(stage_url(participant))
    return render(request, "evaluation/participant/done.html", {"participant": participant, "study": participant.study})


@require_http_methods(["GET", "HEAD"])
def image(request, token, signed):
    try:
        value = signing.TimestampSigner(salt=IMAGE_SALT).unsign_object(signed, max_age=settings.STUDY_IMAGE_URL_MAX_AGE)
    except signing.BadSignature:  # also SignatureExpired
        raise Http404("This image link has expired; reload the page.")
    assignment = (
        Assignment.objects.select_related("item__pair__image_1", "item__pair__image_2")
        .filter(token=value.get("a"), participant__token=token)
        .first()
    )
    if assignment is None or value.get("s") not in (1, 2):
        raise Http404("No such image.")
    picture = assignment.item.pair.image_1 if value["s"] == 1 else assignment.item.pair.image_2
    content_type = mimetypes.guess_type(picture.file.name)[0] or "image/jpeg"
    # Plain bytes, not FileResponse: that would name the stored file in Content-Disposition.
    with picture.file.open("rb") as handle:
        response = HttpResponse(handle.read(), content_type=content_type)
    response["Cache-Control"] = "private, no-store"
    return response


def _int_or_none(value):
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):  # OverflowError: "1e999" is an infinite float
        return None
