"""The one page form of models that draft: a coordinator chooses the drafting models (on the Models page)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from annotator.drafting import services as drafting
from subtlebench.errors import Forbidden, Invalid
from subtlebench.pages import error_response, post_only
from subtlebench.roles import COORDINATOR, role_required


def _ids(values: list[str]) -> list[int]:
    bad = [value for value in values if not value.isdigit()]
    if bad:
        raise Invalid({"endpoints": [f"Not an endpoint id: {bad[0][:40]!r}."]})
    return [int(value) for value in values]


@role_required(COORDINATOR)
@post_only("model-list")
def drafting_settings(request):
    """Which endpoints may draft, the default drafter, which answer drafts in the background (all off by default)."""
    try:
        default = request.POST.get("default", "")
        drafting.drafting_settings_update(
            user=request.user,
            drafting=_ids(request.POST.getlist("drafting")),
            default=_ids([default])[0] if default else None,
            background=_ids(request.POST.getlist("background")),
        )
    except (Invalid, Forbidden) as error:
        return error_response(request, error, back_to="model-list")
    messages.success(request, "Drafting models saved.")
    return redirect("model-list")
