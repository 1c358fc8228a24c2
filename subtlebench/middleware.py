"""Refuse control characters in the query string and the form bodies of pages, before any view.

A NUL in `?PROLIFIC_PID=` or a form field would reach a query and fail in PostgreSQL (a 500); every view, present
and future, is covered here at once. The answer is a 400 naming the field: the one JSON error body under /api/,
the error page elsewhere. An address with one (`/p/%00/`) names nothing: 404. API bodies (JSON, and forms sent with
PUT, PATCH or POST) are checked by the API's parsers (`api.parsers`).
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers

from subtlebench.errors import Invalid
from subtlebench.pages import error_response
from subtlebench.text import control_characters_in, query_fields
from subtlebench.views import not_found


class ControlCharacterMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if control_characters_in(request.path):
            # No object is named with a control character: the address names nothing (and would fail a query).
            return not_found(request, Http404("No page or object has a control character in its address."))
        found = control_characters_in(query_fields(request.GET))
        # Pages' forms; the API's bodies are its parsers' to read (a view that takes none never parses one).
        if request.method == "POST" and request.content_type in FORM_TYPES and not request.path.startswith("/api/"):
            found.update(control_characters_in(query_fields(request.POST)))
        if found:
            return invalid_request(request, Invalid(found))
        return self.get_response(request)


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def wants_json(request) -> bool:
    """The API, and a page's script that asks for JSON (`Accept: application/json`, e.g. the caption autosave)."""
    return request.path.startswith("/api/") or request.headers.get("Accept", "").startswith("application/json")


def invalid_request(request, error: Invalid):
    if wants_json(request):
        return error_response(request, error)
    return error_response(
        request, error, page=lambda message: render(request, "400.html", {"message": message}, status=400)
    )


class NoStoreMiddleware:
    """Every answer of a view that says nothing of caching is never cached (issue 26): a page carries state that
    changes while it is away (a draft saved since, a queue, a table), and Back must not show the copy the browser kept
    (a stale draft, restored and then saved over the newer one). Views that may be cached say so (`media`: a frame
    never changes under its name); static files are WhiteNoise's, answered before this. `static/js/fresh.js` reloads a
    page the browser restores from its back/forward cache."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not response.has_header("Cache-Control"):
            add_never_cache_headers(response)
        return response
