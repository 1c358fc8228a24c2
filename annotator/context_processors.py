"""Values every page needs: the user's roles and site-wide banners."""

from __future__ import annotations

from annotator.similarity.services import DEMO_BANNER, NO_ACTIVE_MODEL, embedding_model_active
from subtlebench.roles import COORDINATOR, roles_of
from subtlebench.text import text_limits


def site(request):
    roles = roles_of(request.user)
    # `limits`: the editors' maxlength, the same numbers the models and serializers enforce.
    return {"roles": roles, "site_banners": site_banners(roles), "limits": text_limits()}


def site_banners(roles=()) -> list[dict]:
    """Warnings every page shows, from the active embedding model row (the web process never opens weights):
    similarities from an untrained demo model; for coordinators, who can fix it, that no model is active."""
    banners = []
    model = embedding_model_active()
    if model is not None and model.demo:
        banners.append({"level": "warning", "text": DEMO_BANNER})
    elif model is None and COORDINATOR in roles:
        banners.append({"level": "warning", "text": f"Similarity: {NO_ACTIVE_MODEL}; pairs stay pending until then."})
    return banners
