"""Site-wide views: the home page, the health check, media files from local storage, and the 500 handler."""

from __future__ import annotations

import mimetypes
import sys

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.files.storage import default_storage
from django.db import DatabaseError, connection
from django.http import FileResponse, Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.html import escape
from django.views import defaults
from django.views.decorators.http import require_GET

from subtlebench.errors import ServiceError, dependency_unavailable, error_body


@login_required
@require_GET
def home(request):
    return render(request, "home.html")


@require_GET
def healthz(request):
    """200 "ok" when the database and the broker answer; 503 with one line per dependency when either does not."""
    checks = {"database": _database_problem(), "broker": _broker_problem()}
    if not any(checks.values()):
        return HttpResponse("ok", content_type="text/plain")
    lines = [f"{name}: {problem or 'ok'}" for name, problem in checks.items()]
    return HttpResponse("unavailable\n" + "\n".join(lines) + "\n", status=503, content_type="text/plain")


def _database_problem() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return f"unreachable ({_first_line(error)})"
    return ""


def _broker_problem() -> str:
    import redis

    # A short timeout: a load balancer's health check must not hang on a broker that swallows packets.
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as error:
        return f"unreachable ({_first_line(error)})"
    finally:
        client.close()
    return ""


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


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
    """Media from the local storage folder, for logged-in users only (S3 storage hands out signed URLs)."""
    if ".." in name.split("/") or not default_storage.exists(name):
        raise Http404("No such file.")
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    response = FileResponse(default_storage.open(name, "rb"), content_type=content_type)
    response["Cache-Control"] = "private, max-age=86400"
    return response
