"""The coordinator's override of the subtlety rule, from the pair's review page."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse

from annotator.models import Pair
from annotator.similarity.services import pair_override_similarity
from subtlebench.errors import Invalid
from subtlebench.pages import error_response, post_only
from subtlebench.roles import COORDINATOR, role_required


@role_required(COORDINATOR)
@post_only("picking-review-pair")
def pair_override(request, pair_id: int):
    pair = get_object_or_404(Pair, pk=pair_id)
    try:
        pair_override_similarity(pair=pair, user=request.user, reason=request.POST.get("reason", ""))
    except Invalid as error:
        return error_response(request, error, back_to=reverse("picking-review-pair", args=[pair.pk]))
    messages.success(request, f"Pair {pair.pk} may now be accepted and exported despite its similarity.")
    return redirect("picking-review-pair", pair_id=pair.pk)
