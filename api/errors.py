"""The API's one error body, `{"detail": "...", "errors": {field: [messages]}}`, and how the schema documents it.

`exception_handler` (settings REST_FRAMEWORK EXCEPTION_HANDLER) answers every error this way: the services' four
kinds (subtlebench.errors), Django's ValidationError, PermissionDenied and Http404, and DRF's own (serializer
validation, not authenticated, wrong method, malformed body, throttling...), and a database or broker that cannot
be reached (503). Views raise; they never build an error response themselves. Any other exception is a 500 that
`subtlebench.views.server_error` answers in the same body under /api/; an unknown /api/ URL is `api.views.not_found`.
"""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from subtlebench.errors import ServiceError, dependency_unavailable, error_body, error_status
from subtlebench.tokens import TokenRefused

logger = logging.getLogger(__name__)


def exception_handler(exc, context) -> Response | None:
    if isinstance(exc, ServiceError | ValidationError):
        set_rollback()
        return Response(error_body(exc), status=error_status(exc))
    unavailable = dependency_unavailable(exc)
    if unavailable is not None:
        logger.error("API %s: %s (%r)", context["request"].path, unavailable.detail, exc)
        return Response(error_body(unavailable), status=unavailable.status, headers={"Retry-After": "30"})
    # DRF's handler turns Http404, PermissionDenied and its own exceptions into a response with the right status
    # and headers (WWW-Authenticate, Retry-After); only its body changes here. Anything else stays a 500.
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, TokenRefused):
        response.status_code = 401
        response["WWW-Authenticate"] = 'Token realm="api"'
    data = response.data
    if isinstance(data, dict) and set(data) == {"detail"} and not isinstance(exc, exceptions.ValidationError):
        response.data = {"detail": str(data["detail"]), "errors": {}}
    else:  # a serializer's errors by field, or any detail given as a list or a dict
        response.data = validation_body(data)
    return response


def validation_body(data) -> dict:
    """A DRF ValidationError's detail (a dict by field, or a list) as the one body."""
    if not isinstance(data, dict):
        return {"detail": " ".join(_messages(data)), "errors": {}}
    general = _messages(data.get(api_settings.NON_FIELD_ERRORS_KEY, []))
    errors = {field: _messages(value) for field, value in data.items() if field != api_settings.NON_FIELD_ERRORS_KEY}
    detail = general + [f"{field}: {message}" for field, messages in errors.items() for message in messages]
    return {"detail": " ".join(detail), "errors": errors}


def _messages(value) -> list[str]:
    """Plain texts from DRF's nested error details; a list item's or a key's errors say which ('0: ...')."""
    if isinstance(value, dict):
        return [f"{key}: {message}" for key, item in value.items() for message in _messages(item)]
    if isinstance(value, list):
        return [message for item in value for message in _messages(item)]
    return [str(value)]


class BodyTooLarge(exceptions.APIException):
    status_code = 413
    default_detail = "The request body is too large."
    default_code = "too_large"


# --- The schema ---------------------------------------------------------------------------------------------


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong and where, to show as it is.")
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Messages by request field; empty when no single field is at fault.",
    )


ERROR_MEANINGS = {
    400: "Invalid: the body or the query is wrong (by field in `errors`), or the request cannot be done as sent.",
    401: "The token sent has expired or was revoked: make a new one (POST /api/token/).",
    403: "Not logged in (no session, no valid token), or without the role or the ownership this needs.",
    404: "An object the request names does not exist.",
    409: "Conflict: the object moved on since the client saw it (someone else holds it, it was decided, it changed).",
    413: "The body is larger than this endpoint takes: nothing of it was read.",
    429: "Too many requests (a throttle, or a login locked out after failed tries): wait `Retry-After` seconds.",
    503: "The database or the task queue cannot be reached right now: retry after the Retry-After seconds.",
}


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error statuses an endpoint can answer, each with the one error body: `responses={200: X, **errors(...)}`.
    An endpoint that needs a login (403) also answers 401 to a token that expired or was revoked."""
    if 403 in statuses and 401 not in statuses:
        statuses = (401, *statuses)
    return {status: OpenApiResponse(ErrorSerializer, description=ERROR_MEANINGS[status]) for status in statuses}
