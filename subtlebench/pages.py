"""How an HTML page answers a service error (`subtlebench.errors`): one helper, three ways a page shows things.

- `back_to`: the message is flashed and the browser goes to that page (a redirect, as after a success), for
  buttons whose page shows the outcome elsewhere;
- `page`: the page is shown again with the error's status, `page(message)` rendering it; with `form`, the errors
  are put on the form first, each beside its field when the form has one;
- neither: the API's body `{"detail": ..., "errors": {...}}` as JSON with the error's status, for a page's script.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib import messages
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import HttpResponse, HttpResponseNotAllowed, JsonResponse, QueryDict
from django.shortcuts import redirect
from django.urls import NoReverseMatch, reverse

from subtlebench.errors import error_body, error_status, page_detail, page_message


def error_response(
    request,
    error: Exception,
    *,
    back_to: str | None = None,
    form=None,
    page: Callable[[str], HttpResponse] | None = None,
) -> HttpResponse:
    if back_to is not None:
        messages.error(request, page_detail(error))
        return redirect(back_to)
    if page is None:
        return JsonResponse(error_body(error), status=error_status(error))
    if form is not None:
        form_add_errors(form, error)
    response = page(page_detail(error))
    response.status_code = error_status(error)
    return response


def form_add_errors(form, error: Exception) -> None:
    """A service error on a Django form: field messages beside their field, the rest above the form."""
    if not (isinstance(error, ValidationError) and hasattr(error, "error_dict")):
        form.add_error(None, page_detail(error))
        return
    for field, field_messages in error.message_dict.items():
        if field in form.fields:
            form.add_error(field, field_messages)
        elif field == NON_FIELD_ERRORS:
            form.add_error(None, field_messages)
        else:
            form.add_error(None, [page_message(field, message) for message in field_messages])


# --- Post/Redirect/Get -----------------------------------------------------------------------------------------

CARRY_KEY = "form-carry:"


def post_only(back_to: str):
    """`require_POST` for the target of a page's form, without the blank 405 of a GET.

    A GET of such an address (reopened from the history, typed, or a reload after the browser dropped the post)
    goes to `back_to`, the page that holds the form (a URL name, reversed with the view's kwargs when it takes
    them), with a note saying so. PUT, DELETE and the rest still answer 405.
    """

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if request.method in ("GET", "HEAD"):
                messages.info(request, "That address only receives a form: here is the page with the form.")
                return redirect(_reverse_with(back_to, kwargs))
            if request.method != "POST":
                return HttpResponseNotAllowed(["POST"])
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def _reverse_with(name: str, kwargs: dict) -> str:
    """The page's address with as many of the view's kwargs as it takes, leading ones first (the participant's
    token, not the item's)."""
    items = list(kwargs.items())
    for count in range(len(items), -1, -1):
        try:
            return reverse(name, kwargs=dict(items[:count]))
        except NoReverseMatch:
            continue
    raise NoReverseMatch(name)


def redirect_refused(request, to: str, *, data: dict, error: Exception | str) -> HttpResponse:
    """Post/Redirect/Get for a refused form: what was sent and why it was refused wait in the session, and the
    browser goes to the form's page (`to`, a path), whose next GET shows them (`carried`). A reload of that page
    asks nothing and shows the form as stored then."""
    body = error_body(error) if isinstance(error, Exception) else {"detail": error, "errors": {}}
    detail = page_detail(error) if isinstance(error, Exception) else error
    request.session[CARRY_KEY + to] = {"data": data, "detail": detail, "errors": body.get("errors", {})}
    return redirect(to)


def carried(request) -> dict | None:
    """What a refused post left for this page (`redirect_refused`), once: {"data", "detail", "errors"}, or None."""
    return request.session.pop(CARRY_KEY + request.path, None)


def redirect_refused_form(
    request, to: str, form, error: Exception | None = None, *, secret_fields: tuple[str, ...] = ()
) -> HttpResponse:
    """`redirect_refused` for a Django form: its fields as sent (not the CSRF token, nor `secret_fields`, which
    never go into the session) and, for a service's error, its messages; the form page rebuilds it with
    `refused_form`, where the form's own checks run again."""
    left_out = {"csrfmiddlewaretoken", *secret_fields}
    data = {name: values for name, values in request.POST.lists() if name not in left_out}
    if error is None:  # the form's own errors: kept as they were, since files cannot travel to the next page
        error = ValidationError(
            {name: [e["message"] for e in errs] for name, errs in form.errors.get_json_data().items()}
        )
    return redirect_refused(request, to, data=data, error=error)


def refused_form(request, form_class, **kwargs):
    """The form of a page: bound to what a refused post sent, with every error it had then; else a fresh one."""
    refused = carried(request)
    if refused is None:
        return form_class(**kwargs)
    data = QueryDict(mutable=True)
    for name, values in refused["data"].items():
        data.setlist(name, values if isinstance(values, list) else [values])
    form = form_class(data, **kwargs)
    form.is_valid()
    for name, field_messages in refused["errors"].items():
        name = name if name in form.fields else None
        new = [m for m in field_messages if m not in form.errors.get(name or NON_FIELD_ERRORS, [])]
        if new:
            form.add_error(name, new)
    if not refused["errors"] and refused["detail"] and not form.errors:
        form.add_error(None, refused["detail"])
    return form
