"""A job that ended with errors never shows as a plain green "succeeded" on the pages."""

from __future__ import annotations

import pytest

from annotator.models import Job

pytestmark = pytest.mark.django_db


def test_a_success_with_errors_says_so_and_is_not_green(client_for, coordinator):
    clean = Job.objects.create(kind=Job.Kind.IMPORT, title="clean import", created_by=coordinator)
    clean.finish(result={})
    partial = Job.objects.create(kind=Job.Kind.IMPORT, title="partial import", created_by=coordinator)
    partial.advance(0, error="b.png: not an image")
    partial.finish(result={})
    partial.refresh_from_db()
    assert partial.status == "succeeded" and partial.errors
    assert (partial.state_label, partial.badge) == ("succeeded with 1 error", "warn")
    client = client_for(coordinator)
    detail = client.get(f"/jobs/{partial.pk}/").content.decode()
    assert "succeeded with 1 error" in detail and "badge-succeeded" not in detail
    listing = client.get("/jobs/").content.decode()
    assert listing.count("badge badge-warn") >= 1 and "succeeded with 1 error" in listing
    assert '<span class="badge badge-succeeded">succeeded</span>' in listing  # the clean one stays green
