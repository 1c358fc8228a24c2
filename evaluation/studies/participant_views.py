"""Pages participants see (no account: the token in the URL is their key). Blinded: no ids, no labels, no answers."""

from __future__ import annotations

import logging
import secrets

from django.conf import settings
from django.core import signing
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotator.images import ImageLimitError
from annotator.picking.guidelines import guideline_in_force, markdown_html
from evaluation.models import Assignment, Participant, Study, StudyItem
from evaluation.studies import participation, screens, served_images
from evaluation.studies import services as studies
from subtlebench.errors import Forbidden, ServiceError, page_detail
from subtlebench.pages import error_response, post_only
from subtlebench.security import client_ip
from subtlebench.throttles import ParticipantJoinThrottle, throttle_wait

log = logging.getLogger(__name__)

IMAGE_SALT = "evaluation.participant-image"
IMAGES_RETRY_SECONDS = 30  # an item held back while the media storage does not answer is tried again this often
AGREE_FIRST = "Please tick the box to agree before you start."


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
        "question": assignment.item.presented().question,
        "image_1": image_url(assignment, 1),
        "image_2": image_url(assignment, 2),
        "planned": studies.planned_items(study),
        "client_key": participation.new_client_key(),
        "guideline": _guideline_html(study, assignment.item),
    }


def _guideline_html(study: Study, item) -> str:
    """The text of the guideline in force for the item's category and domain, where the study shows them ("")."""
    if not study.show_guidelines:
        return ""
    version = guideline_in_force(category=item.category, domain=item.domain)
    return markdown_html(version.body) if version is not None else ""


def stage_url(participant: Participant) -> str:
    name = {
        "invited": "participant-start",
        "practice": "participant-practice",
        "scored": "participant-item",
        "finished": "participant-done",
        "turned away": "participant-done",
        "expired": "participant-done",
        "screened out": "participant-done",
        "returned": "participant-done",
    }[participant.stage]
    return reverse(name, args=[participant.token])


def _session_key(study: Study) -> str:
    return f"study-{study.pk}-participant"


# The open link's mark on a browser that took part (issue 24): a signed cookie holding the session's token, sent only
# to that study's open link. It outlives the browser session, so one browser gets one session of a study.
JOINED_SALT = "evaluation.open-link-joined"
JOINED_MAX_AGE = 365 * 24 * 3600


def _joined_cookie(study: Study) -> str:
    return f"study-{study.pk}-joined"


def _joined(request, study: Study) -> str:
    """The token of the session this browser joined the study's open link with ("" for none, or a forged cookie)."""
    return request.get_signed_cookie(_joined_cookie(study), default="", salt=JOINED_SALT, max_age=JOINED_MAX_AGE)


def _mark_joined(response, study: Study, participant: Participant) -> None:
    response.set_signed_cookie(
        _joined_cookie(study),
        participant.token,
        salt=JOINED_SALT,
        max_age=JOINED_MAX_AGE,
        path=f"/p/open/{study.open_token}/",
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


# The browser's own mark (a first-party cookie sent to the participant pages only): a random key, signed, that
# counts the sessions one browser starts on an open link (STUDY_OPEN_JOINS_PER_DEVICE). A script that drops its
# cookies gets a new one each time: the per-address limit is what holds it then.
DEVICE_COOKIE = "subtlebench-device"
DEVICE_SALT = "evaluation.participant-device"


def _device(request) -> str:
    """This browser's device key ("" for none yet, or a forged cookie)."""
    return request.get_signed_cookie(DEVICE_COOKIE, default="", salt=DEVICE_SALT, max_age=JOINED_MAX_AGE)


def _device_or_new(request) -> str:
    return _device(request) or secrets.token_urlsafe(24)


def _mark_device(response, request, device: str) -> None:
    if device and device != _device(request):
        response.set_signed_cookie(
            DEVICE_COOKIE,
            device,
            salt=DEVICE_SALT,
            max_age=JOINED_MAX_AGE,
            path="/p/",
            secure=settings.SESSION_COOKIE_SECURE,
            httponly=True,
            samesite="Lax",
        )


def _closed_page(request, error, title: str = "Not available"):
    if isinstance(error, participation.AlreadyTakenPart):
        title = "You have already taken part"
    return error_response(
        request,
        error,
        page=lambda message: render(
            request, "evaluation/participant/closed.html", {"message": message, "title": title}
        ),
    )


def _no_items_page(request, study: Study):
    """No scored item can be served: the study's own "no items" code and return URL, never the completion code."""
    return render(request, "evaluation/participant/no_items.html", {"study": study}, status=200)


def _start_page(
    request, study: Study, action: str, params, error: str = "", status: int = 200, screen_out: str = "", back=""
):
    context = {
        "study": study,
        "action": action,
        "prolific": participation.prolific_parameters(params),
        "error": error,
        "screen_out_action": screen_out,
        "return_url": back,
    }
    return render(request, "evaluation/participant/start.html", context, status=status)


def _measured_screen(request, study: Study) -> screens.Screen:
    """The window the consent form measured, held to the study's minimum here too (the page checks it first)."""
    screen = screens.screen_from_form(request.POST, user_agent=request.headers.get("User-Agent", ""))
    screens.screen_check(study=study, screen=screen)
    return screen


def _too_many_arrivals(request):
    """A 429 page when one address asks for the open link's pages too often (a flood guard: requests are counted
    here; the joins themselves are counted per address by participant_join_open). None when allowed."""
    wait = throttle_wait(ParticipantJoinThrottle, request)
    if wait is None:
        return None
    response = render(
        request,
        "evaluation/participant/closed.html",
        {"message": f"Too many new participants from your address: try again in {int(wait) + 1} seconds."},
        status=429,
    )
    response["Retry-After"] = str(int(wait) + 1)
    return response


@require_GET
def open_link(request, open_token):
    """The open link's consent page. A GET takes no place and creates nobody: that happens at consent."""
    throttled = _too_many_arrivals(request)
    if throttled is not None:
        return throttled
    study = get_object_or_404(Study, open_token=open_token)
    device = _device_or_new(request)
    try:
        existing = participation.participant_returning(
            study=study,
            params=request.GET,
            resumable=request.session.get(_session_key(study), ""),
            joined=_joined(request, study),
            device=device,
        )
        if existing is not None:
            return redirect(stage_url(existing))
        participation.open_link_arrival_check(study=study)
    except participation.NoItemsLeft:
        # Only a visit: nobody agreed, so nobody was turned away (the consent below counts those who were).
        return _no_items_page(request, study)
    except Forbidden as error:  # full, no open link, a Prolific id or a browser that already took part
        return _closed_page(request, error)
    response = _start_page(
        request,
        study,
        reverse("participant-open-consent", args=[open_token]),
        request.GET,
        screen_out=reverse("participant-open-screen-out", args=[open_token]),
    )
    _mark_device(response, request, device)
    return response


@post_only("participant-open")
def open_consent(request, open_token):
    throttled = _too_many_arrivals(request)
    if throttled is not None:
        return throttled
    study = get_object_or_404(Study, open_token=open_token)
    action = reverse("participant-open-consent", args=[open_token])
    screen_out_action = reverse("participant-open-screen-out", args=[open_token])
    if request.POST.get("agree") != "yes":
        return _start_page(
            request, study, action, request.POST, error=AGREE_FIRST, status=400, screen_out=screen_out_action
        )
    device = _device_or_new(request)
    try:
        screen = _measured_screen(request, study)
        participant = participation.participant_join_open(
            study=study,
            params=request.POST,
            resumable=request.session.get(_session_key(study), ""),
            joined=_joined(request, study),
            device=device,
            address=client_ip(request),
            screen=screen,
        )
    except participation.NoItemsLeft:
        _count_turned_away_once(request, study)
        return _no_items_page(request, study)
    except participation.TooManyJoins as error:
        response = render(request, "evaluation/participant/closed.html", {"message": error.detail}, status=429)
        response["Retry-After"] = str(error.retry_after)
        return response
    except Forbidden as error:
        return _closed_page(request, error)
    except ServiceError as error:  # a window below the study's minimum, or none measured
        return _start_page(
            request,
            study,
            action,
            request.POST,
            error=page_detail(error),
            status=error.status,
            screen_out=screen_out_action,
        )
    request.session[_session_key(study)] = participant.token
    response = redirect(stage_url(participant))
    _mark_joined(response, study, participant)
    _mark_device(response, request, device)
    return response


def _count_turned_away_once(request, study: Study) -> None:
    """Count an open-link arrival who agreed and found no item left (once per browser session): no participant row
    records them, since no place was taken."""
    key = f"study-{study.pk}-turned-away"
    if not request.session.get(key):
        studies.study_count_turned_away(study=study)
        request.session[key] = True


@require_GET
def start(request, token):
    """An invite's consent page: like the open link's, it takes nothing on a GET."""
    participant = load_participant(token)
    if participant.consented_at or participant.finished_at or participant.ended_at:
        return redirect(stage_url(participant))
    study = participant.study
    pid = participation.prolific_parameters(request.GET).get("PROLIFIC_PID")
    if pid and study.participants.with_pid(pid).exclude(pk=participant.pk).exists():
        return _closed_page(request, participation.AlreadyTakenPart(participation.ALREADY_TOOK_PART))
    if not study.has_items_for(participant):
        participant.turn_away()
        return _no_items_page(request, study)
    return _start_page(
        request,
        study,
        reverse("participant-consent", args=[token]),
        request.GET,
        screen_out=reverse("participant-screen-out", args=[token]),
        back=reverse("participant-return", args=[token]),
    )


@post_only("participant-start")
def consent(request, token):
    participant = load_participant(token)
    if participant.consented_at or participant.ended_at:  # a second tab's form: the first consent (or end) stands
        return redirect(stage_url(participant))
    study = participant.study
    action = reverse("participant-consent", args=[token])
    ends = {
        "screen_out": reverse("participant-screen-out", args=[token]),
        "back": reverse("participant-return", args=[token]),
    }
    if request.POST.get("agree") != "yes":
        return _start_page(request, study, action, request.POST, error=AGREE_FIRST, status=400, **ends)
    try:
        screen = _measured_screen(request, study)
        participant = participation.participant_consent(participant=participant, params=request.POST, screen=screen)
    except participation.AlreadyTakenPart as error:
        return _closed_page(request, error)
    except ServiceError as error:  # a window below the study's minimum, or none measured
        return _start_page(request, study, action, request.POST, error=page_detail(error), status=error.status, **ends)
    request.session[_session_key(study)] = participant.token
    return redirect(stage_url(participant))


@require_GET
def practice(request, token):
    participant = load_participant(token)
    if participant.stage != "practice":
        return redirect(stage_url(participant))
    try:
        assignment = participation.participant_next_practice(participant=participant)
    except participation.SessionExpired:
        return redirect(stage_url(participant))
    if assignment is None and not participant.study.practice_count:
        return redirect("participant-item", token)  # no practice block: straight to the items
    if assignment is None:
        return render(request, "evaluation/participant/practice_done.html", {"participant": participant})
    if not served_images.participant_images_ready(assignment):
        return _images_later(request, participant)
    context = item_context(assignment) | {
        "practice": True,
        "action": reverse("participant-practice-answer", args=[token, assignment.token]),
    }
    return render(request, "evaluation/participant/item.html", context)


@require_http_methods(["GET", "POST"])
def practice_answer(request, token, item_token):
    """A practice answer (POST), then its feedback at the same address (GET): Post/Redirect/Get, so a reload of
    the feedback shows it again and sends nothing. A GET of an item not answered yet goes to the practice page."""
    participant = load_participant(token)
    assignment = (
        Assignment.objects.select_related(*participation.item_presented(), "participant__study")
        .filter(participant=participant, token=item_token, item__kind=StudyItem.Kind.PRACTICE)
        .first()
    )
    if assignment is None:
        if request.method == "GET":  # an old or typed address: the practice page shows what is current
            return redirect("participant-practice", token)
        raise Http404("No such practice item.")
    if request.method == "POST":
        try:
            participation.assignment_answer(
                participant=participant,
                token=item_token,
                position=request.POST.get("option"),
                active_ms=_int_or_none(request.POST.get("active_ms")),
            )
        except ServiceError:  # a stale or repeated form: the practice page shows whatever is current now
            return redirect("participant-practice", token)
        return redirect("participant-practice-answer", token, item_token)
    if assignment.answered_at is None or assignment.chosen is None:
        return redirect("participant-practice", token)
    options = assignment.item.presented().options
    context = {
        "participant": participant,
        "correct": assignment.correct,
        "answer": options[0],
        "chosen": options[assignment.chosen],
    } | practice_feedback_context(assignment)
    return render(request, "evaluation/participant/practice_feedback.html", context)


def practice_feedback_context(assignment: Assignment) -> dict:
    """The practice pair again, its options in the order shown, the right one (and a wrong choice) marked."""
    presented = assignment.item.presented()
    options = presented.options
    marked = [
        {"text": options[index], "right": index == 0, "chosen": index == assignment.chosen}
        for index in assignment.permutation
    ]
    return {
        "question": presented.question,
        "marked_options": marked,
        "image_1": image_url(assignment, 1),
        "image_2": image_url(assignment, 2),
    }


@require_GET
def item(request, token):
    participant = load_participant(token)
    if participant.stage != "scored":
        return redirect(stage_url(participant))
    try:
        assignment = participation.participant_next_item(participant=participant)
    except participation.SessionExpired:
        return redirect(stage_url(participant))
    if assignment is None:
        participant.refresh_from_db(fields=["finished_at", "turned_away_at"])
        if participant.stage == "scored":
            return render(request, "evaluation/participant/wait.html", {"participant": participant})
        return redirect(stage_url(participant))
    if not served_images.participant_images_ready(assignment):
        return _images_later(request, participant)
    context = item_context(assignment) | {
        "practice": False,
        "action": reverse("participant-answer", args=[token, assignment.token]),
    }
    return render(request, "evaluation/participant/item.html", context)


@post_only("participant-item")
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
    study = participant.study
    if participant.stage == "turned away":
        return _no_items_page(request, study)
    if participant.stage == "expired":
        return render(request, "evaluation/participant/expired.html", {"participant": participant, "study": study})
    if participant.stage in ("screened out", "returned"):
        return _ended_page(request, participant)
    if participant.stage != "finished":
        return redirect(stage_url(participant))
    context = {"participant": participant, "study": study, "redirect_seconds": settings.STUDY_REDIRECT_SECONDS}
    return render(request, "evaluation/participant/done.html", context)


def _ended_page(request, participant: Participant):
    """The page of a session that ended unfinished: its code (screen-out or return) and Prolific's redirect with it.
    Only here, and only for such a session: no earlier page holds either code."""
    study = participant.study
    screened = participant.stage == "screened out"
    context = {
        "participant": participant,
        "study": study,
        "screened": screened,
        "code": study.screen_out_code if screened else study.return_code,
        "redirect": study.screen_out_url if screened else study.return_url,
        "redirect_seconds": settings.STUDY_REDIRECT_SECONDS,
    }
    return render(request, "evaluation/participant/ended.html", context)


def _screen_out_refused(request, study: Study, participant: Participant | None, error, open_token: str = ""):
    """A screen-out asked for with a window that fits (or none measured): the consent page again, saying why."""
    if participant is None:
        action = reverse("participant-open-consent", args=[open_token])
        ends = {"screen_out": reverse("participant-open-screen-out", args=[open_token])}
    else:
        action = reverse("participant-consent", args=[participant.token])
        ends = {
            "screen_out": reverse("participant-screen-out", args=[participant.token]),
            "back": reverse("participant-return", args=[participant.token]),
        }
    return _start_page(request, study, action, request.POST, error=page_detail(error), status=error.status, **ends)


@post_only("participant-start")
def screen_out(request, token):
    """An invite's "my window cannot be made larger": screened out, when the window measured is below the minimum."""
    participant = load_participant(token)
    try:
        screen = screens.screen_from_form(request.POST, user_agent=request.headers.get("User-Agent", ""))
        participant = participation.participant_screen_out(participant=participant, params=request.POST, screen=screen)
    except ServiceError as error:
        return _screen_out_refused(request, participant.study, participant, error)
    return redirect(stage_url(participant))


@post_only("participant-open")
def open_screen_out(request, open_token):
    """The open link's "my window cannot be made larger": a session that ends screened out at once."""
    throttled = _too_many_arrivals(request)
    if throttled is not None:
        return throttled
    study = get_object_or_404(Study, open_token=open_token)
    device = _device_or_new(request)
    try:
        screen = screens.screen_from_form(request.POST, user_agent=request.headers.get("User-Agent", ""))
        participant = participation.participant_screen_out_open(
            study=study,
            params=request.POST,
            screen=screen,
            resumable=request.session.get(_session_key(study), ""),
            joined=_joined(request, study),
            device=device,
            address=client_ip(request),
        )
    except Forbidden as error:  # a Prolific id or a browser that already took part
        return _closed_page(request, error)
    except ServiceError as error:
        return _screen_out_refused(request, study, None, error, open_token=open_token)
    request.session[_session_key(study)] = participant.token
    response = redirect(stage_url(participant))
    _mark_joined(response, study, participant)
    _mark_device(response, request, device)
    return response


@require_http_methods(["GET", "POST"])
def return_study(request, token):
    """ "Stop and return the study": a page that asks (GET), then the session ends as returned (POST) and the done
    page gives the return code. A session that finished or ended already goes to its own page."""
    participant = load_participant(token)
    if participant.stage in ("finished", "screened out", "returned", "turned away", "expired"):
        return redirect(stage_url(participant))
    if request.method == "POST":
        participant = participation.participant_return(participant=participant)
        return redirect(stage_url(participant))
    return render(
        request, "evaluation/participant/return.html", {"participant": participant, "back": stage_url(participant)}
    )


def _images_later(request, participant: Participant):
    """The item's images cannot be read now (the media storage does not answer): no item without its images (an
    answer to a pair not seen would be counted); the page tries again by itself, and shows the item then."""
    context = {"participant": participant, "retry_seconds": IMAGES_RETRY_SECONDS}
    response = render(request, "evaluation/participant/images_later.html", context, status=503)
    response["Retry-After"] = str(IMAGES_RETRY_SECONDS)
    return response


@require_http_methods(["GET", "HEAD"])
def image(request, token, signed):
    try:
        value = signing.TimestampSigner(salt=IMAGE_SALT).unsign_object(signed, max_age=settings.STUDY_IMAGE_URL_MAX_AGE)
    except signing.BadSignature:  # also SignatureExpired
        raise Http404("This image link has expired; reload the page.")
    assignment = (
        Assignment.objects.select_related(
            "participant",
            "item__pair__image_1",
            "item__pair__image_2",
            "item__release_item__image_1",
            "item__release_item__image_2",
        )
        .filter(token=value.get("a"), participant__token=token)
        .first()
    )
    if assignment is None or value.get("s") not in (1, 2):
        raise Http404("No such image.")
    # Never the stored bytes: the pixels written again for this participant (the released order for an item of a
    # release), so no export's or dataset's file matches by hash or size (served_images). Plain bytes, not
    # FileResponse: that would name a file in Content-Disposition.
    try:
        encoded = served_images.participant_image(assignment=assignment, slot=value["s"])
    except ImageLimitError as error:  # the operator's log names the file and the limit; the participant sees none
        log.warning("participant image not served: %s", error)
        raise Http404("This image cannot be shown.") from None
    except served_images.ImageUnavailable as error:  # not cached, and the storage does not answer: try again soon
        log.warning("participant image not served now: %s", error)
        response = HttpResponse("This image cannot be loaded just now.", status=503, content_type="text/plain")
        response["Retry-After"] = str(IMAGES_RETRY_SECONDS)
        return response
    response = HttpResponse(encoded)
    response["Content-Type"] = "image/jpeg"
    response["Cache-Control"] = "private, no-store"
    return response


def _int_or_none(value):
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):  # OverflowError: "1e999" is an infinite float
        return None
