"""The coordinator's override of the subtlety rule, from the pair's review page."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from annotator.models import Pair
from annotator.similarity.services import pair_override_similarity
from subtlebench.roles import COORDINATOR, role_required


@role_required(COORDINATOR)
@require_POST
def pair_override(request, pair_id: int):
    pair = get_object_or_404(Pair, pk=pair_id)
    try:
        pair_override_similarity(pair=pair, user=request.user, reason=request.POST.get("reason", ""))
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, f"Pair {pair.pk} may now be accepted and exported despite its similarity.")
    return redirect("picking-review-pair", pair_id=pair.pk)
