"""Site-wide views: the home page, the health check, and media files from local storage."""

from __future__ import annotations

import mimetypes

from django.contrib.auth.decorators import login_required
from django.core.files.storage import default_storage
from django.db import connection
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET


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
