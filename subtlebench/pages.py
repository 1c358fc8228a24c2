"""How an HTML page answers a service error (`subtlebench.errors`): one helper, three ways a page shows things.

- `back_to`: the message is flashed and the browser goes to that page (a redirect, as after a success), for
  buttons whose page shows the outcome elsewhere;
- `page`: the page is shown again with the error's status, `page(message)` rendering it; with `form`, the errors
  are put on the form first, each beside its field when the form has one;
- neither: the API's body `{"detail": ..., "errors": {...}}` as JSON with the error's status, for a page's script.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect

from subtlebench.errors import error_body, error_status


def error_response(
    request,
    error: Exception,
    *,
    back_to: str | None = None,
    form=None,
    page: Callable[[str], HttpResponse] | None = None,
) -> HttpResponse:
    body = error_body(error)
    if back_to is not None:
        messages.error(request, body["detail"])
        return redirect(back_to)
    if page is None:
        return JsonResponse(body, status=error_status(error))
    if form is not None:
        form_add_errors(form, error)
    response = page(body["detail"])
    response.status_code = error_status(error)
    return response


def form_add_errors(form, error: Exception) -> None:
    """A service error on a Django form: field messages beside their field, the rest above the form."""
    if not (isinstance(error, ValidationError) and hasattr(error, "error_dict")):
        form.add_error(None, error_body(error)["detail"])
        return
    for field, field_messages in error.message_dict.items():
        if field in form.fields:
            form.add_error(field, field_messages)
        elif field == NON_FIELD_ERRORS:
            form.add_error(None, field_messages)
        else:
            form.add_error(None, [f"{field}: {message}" for message in field_messages])
