"""Site-wide views: the health check, media files from local storage, the 500 handler, the login
lockout, and the account's API tokens."""

from __future__ import annotations

import hmac
import mimetypes
import sys

from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.files.storage import default_storage
from django.db import DatabaseError
from django.http import FileResponse, Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.views import defaults
from django.views.decorators.http import require_GET, require_http_methods

from subtlebench.errors import Invalid, NotFound, ServiceError, dependency_unavailable, error_body
from subtlebench.health import DOWN, OK, critical_parts, health_log, health_parts, overall
from subtlebench.models import ApiToken
from subtlebench.pages import carried, error_response, post_only, redirect_refused
from subtlebench.roles import roles_of
from subtlebench.tokens import api_token_create, api_token_revoke


@require_GET
def healthz(request):
    """JSON: the overall status and one per part; 503 when the database or the broker is down.

    The plain check (for load balancers) asks only those two and says "ok"/"down" per part. `?deep=1` adds beat,
    the workers per queue, the storage and the waiting job units, with details (host names, errors): for staff and
    for callers with the HEALTHZ_TOKEN, 403 for anyone else (subtlebench.health)."""
    deep = request.GET.get("deep", "") not in ("", "0")
    critical = critical_parts()
    # A session is looked up in the database: one that hangs or is down is not asked (only the token opens details).
    allowed = _health_details_allowed(request, session=critical["database"]["status"] == OK)
    if deep and not allowed:
        body = {
            "detail": "The deep health check needs a staff login or the HEALTHZ_TOKEN (Authorization: Bearer).",
            "errors": {},
        }
        return JsonResponse(body, status=403)
    parts = health_parts(deep=deep, critical=critical)
    if deep:
        health_log(parts)
    if not allowed:
        parts = {name: {"status": state["status"]} for name, state in parts.items()}
    status = overall(parts)
    return JsonResponse({"status": status, "parts": parts}, status=503 if status == DOWN else 200)


def _health_details_allowed(request, *, session: bool) -> bool:
    token = settings.HEALTHZ_TOKEN
    sent = request.headers.get("Authorization", "")
    if token and sent.startswith("Bearer ") and hmac.compare_digest(sent[len("Bearer ") :].encode(), token.encode()):
        return True
    if not session:
        return False
    try:
        return bool(request.user.is_authenticated and request.user.is_staff)
    except DatabaseError:  # the session lives in the database, which is down: no details, the parts say why
        return False


def server_error(request):
    """handler500: the API's error body under /api/, an HTML page elsewhere; 503 when the database or the broker
    could not be reached (the exception being handled says which), 500 for anything else."""
    error = sys.exc_info()[1]
    unavailable = dependency_unavailable(error) if error is not None else None
    if request.path.startswith("/api/"):
        body = error_body(unavailable or ServiceError("Internal server error: it was logged. Try again later."))
        return JsonResponse(body, status=unavailable.status if unavailable else 500)
    if unavailable is None:
        return defaults.server_error(request)
    # No template: base.html reads the session and the user, which need the database that is down.
    page = (
        '<!doctype html><meta charset="utf-8"><title>Unavailable · SubtleBench Studio</title>'
        '<body style="font: 15px/1.5 system-ui, sans-serif; color: #1f2933; max-width: 40rem; margin: 4rem auto">'
        f"<h1 style='font-size: 1.3rem'>Service unavailable</h1><p>{escape(unavailable.detail)}</p></body>"
    )
    return HttpResponse(page, status=unavailable.status, headers={"Retry-After": "30"})


@login_required
@require_GET
def media(request, name):
    """Media from the local storage folder, for users with a role only (S3 storage hands out signed URLs).

    Participants of studies have no account: they get each image through a signed, expiring URL of their own
    (evaluation.studies.participant_views.image), never through here. An account without a role sees nothing either.
    """
    if not roles_of(request.user):
        raise Http404("No such file.")
    if ".." in name.split("/") or not default_storage.exists(name):
        raise Http404("No such file.")
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    response = FileResponse(default_storage.open(name, "rb"), content_type=content_type)
    response["Cache-Control"] = "private, max-age=86400"
    return response


def lockout(request, original_response=None, credentials=None):
    """What django-axes answers once a username+address is locked out (AXES_LOCKOUT_CALLABLE): 429, and when to
    try again, as the API's error body on /api/ and as a page elsewhere."""
    cool_off = get_cool_off(request)
    retry_at = timezone.now() + cool_off if cool_off else None
    message = "Too many failed logins for this username from this address."
    if retry_at:
        message += f" Try again after {retry_at:%H:%M} UTC ({int(cool_off.total_seconds() // 60)} minutes)."
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": message, "errors": {}}, status=429)
    else:
        response = render(request, "registration/lockout.html", {"message": message, "retry_at": retry_at}, status=429)
    if cool_off:
        response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response


def tokens_page(request, *, key: str = "", status: int = 200, error: str = ""):
    tokens = ApiToken.objects.filter(user=request.user)
    context = {
        "tokens": tokens,
        "new_key": key,
        "error": error,
        "now": timezone.now(),
        "default_days": settings.API_TOKEN_DEFAULT_DAYS,
        "max_days": settings.API_TOKEN_MAX_DAYS,
    }
    return render(request, "account/tokens.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def account_tokens(request):
    """Your API tokens: list them, make one (its key is shown once, here)."""
    if request.method == "GET":
        # Post/Redirect/Get: a new key (shown once) or a refusal waits in the session for this one GET.
        refused = carried(request)
        if refused is not None:
            return tokens_page(request, key=refused["data"].get("key", ""), error=refused["detail"])
        return tokens_page(request)
    days = request.POST.get("expires_in_days", "").strip()
    try:
        if days and not days.isdigit():
            raise Invalid({"expires_in_days": ["A whole number of days, or empty for no expiry."]})
        _, key = api_token_create(
            user=request.user, name=request.POST.get("name", ""), expires_in_days=int(days) if days else None
        )
    except ServiceError as error:
        return redirect_refused(request, reverse("account-tokens"), data={}, error=error)
    return redirect_refused(request, reverse("account-tokens"), data={"key": key}, error="")


@login_required
@post_only("account-tokens")
def account_token_revoke(request, token_id: int):
    try:
        api_token_revoke(user=request.user, token_id=token_id)
    except ServiceError as error:
        return error_response(request, error, back_to="account-tokens")
    return redirect("account-tokens")


def not_found(request, exception=None):
    """handler404: an address under /api/ that matches no endpoint (`/api/videos/abc/`) answers the API's JSON
    error body, as the schema documents its 404s; pages keep the HTML page."""
    if request.path.startswith("/api/"):
        error = NotFound(f"There is no API endpoint at {request.path}.")
        return JsonResponse(error_body(error), status=404)
    return defaults.page_not_found(request, exception)


def bad_request(request, exception=None):
    """handler400 (a body Django cannot parse, such as multipart without a boundary): the API's JSON error body
    under /api/, the error page elsewhere, rendered with the request like every page."""
    error = Invalid("The request could not be read: its body or headers are malformed.")
    if request.path.startswith("/api/"):
        return JsonResponse(error_body(error), status=400)
    return render(request, "400.html", {"message": error.detail}, status=400)
