"""Values every page needs: the user's roles and site-wide banners."""

from __future__ import annotations

from annotator.similarity.services import DEMO_BANNER, is_demo_model
from subtlebench.roles import roles_of


def site(request):
    return {"roles": roles_of(request.user), "site_banners": site_banners()}


def site_banners() -> list[dict]:
    """Warnings every page shows, e.g. that similarities come from an untrained demo model."""
    banners = []
    if is_demo_model():
        banners.append({"level": "warning", "text": DEMO_BANNER})
    return banners
