"""Values every page needs: the user's roles, the top bar's menus and site-wide banners."""

from __future__ import annotations

from annotator.similarity.services import DEMO_BANNER, NO_ACTIVE_MODEL, embedding_model_active
from subtlebench.navigation import nav_menus
from subtlebench.roles import COORDINATOR, ROLES, roles_of
from subtlebench.text import text_limits


def site(request):
    roles = roles_of(request.user)
    # `limits`: the editors' maxlength, the same numbers the models and serializers enforce.
    return {
        "roles": roles,
        "site_banners": site_banners(roles),
        "limits": text_limits(),
        "nav_menus": nav_menus(request.user, request.path),
    }


def site_banners(roles=()) -> list[dict]:
    """Warnings about the embedding model, from its row (the web process never opens weights), for the signed-in
    roles that act on similarities: annotators pick pairs by them, reviewers accept by them, coordinators run the
    model. They learn that the similarities come from an untrained demo model; coordinators, who can fix it, also
    that no model is active. Anonymous visitors (the login page), study participants and users without a role
    see no similarity anywhere, so no banner about it either."""
    banners = []
    if not set(roles) & set(ROLES):
        return banners
    model = embedding_model_active()
    if model is not None and model.demo:
        banners.append({"level": "warning", "text": DEMO_BANNER})
    elif model is None and COORDINATOR in roles:
        banners.append({"level": "warning", "text": f"Similarity: {NO_ACTIVE_MODEL}; pairs stay pending until then."})
    return banners
