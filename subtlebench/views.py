"""Site-wide views: the home page, the health check, and media files from local storage."""

from __future__ import annotations

import mimetypes

from django.contrib.auth.decorators import login_required
from django.core.files.storage import default_storage
from django.db import connection
from django.http import FileResponse, Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults
from django.views.decorators.http import require_GET

from subtlebench.errors import Invalid, NotFound, error_body


@login_required
@require_GET
def home(request):
    return render(request, "home.html")


@require_GET
def healthz(request):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return HttpResponse("ok", content_type="text/plain")


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
