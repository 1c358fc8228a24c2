"""The coordinator's override of the subtlety rule: page form and API, recorded with who, when and why."""

from __future__ import annotations

import pytest

from annotator.models import Pair
from tests.factories import make_pair

pytestmark = pytest.mark.django_db


def failing_pair() -> Pair:
    return make_pair(status=Pair.Status.SUBMITTED, similarity=0.42)


def test_the_review_page_offers_the_override_to_coordinators_only(client_for, coordinator, reviewer):
    pair = failing_pair()
    assert b'id="override-form"' in client_for(coordinator).get(f"/review/pairs/{pair.pk}/").content
    assert b'id="override-form"' not in client_for(reviewer).get(f"/review/pairs/{pair.pk}/").content


def test_a_coordinator_overrides_with_a_reason_and_it_is_recorded(client_for, coordinator):
    pair = failing_pair()
    client = client_for(coordinator)
    response = client.post(f"/review/pairs/{pair.pk}/override/", {"reason": "close-up: the change is subtle"})
    assert response["Location"] == f"/review/pairs/{pair.pk}/"
    pair.refresh_from_db()
    assert (pair.similarity_status, pair.similarity_override_by) == ("override", coordinator)
    assert pair.similarity_override_reason == "close-up: the change is subtle"
    assert pair.similarity_override_at is not None
    assert pair.similarity_problem() is None
    page = client.get(f"/review/pairs/{pair.pk}/").content.decode()
    assert "Rule overridden by cora" in page and "close-up: the change is subtle" in page


def test_an_override_without_a_reason_is_refused_and_changes_nothing(client_for, coordinator):
    pair = failing_pair()
    client = client_for(coordinator)
    response = client.post(f"/review/pairs/{pair.pk}/override/", {"reason": "  "}, follow=True)
    assert "Write why this pair is subtle" in response.content.decode()
    pair.refresh_from_db()
    assert (pair.similarity_status, pair.similarity_override_reason) == ("fail", "")


def test_the_override_page_refuses_anonymous_wrong_role_and_get(client, client_for, reviewer, coordinator):
    pair = failing_pair()
    url = f"/review/pairs/{pair.pk}/override/"
    assert client.post(url, {"reason": "x"})["Location"].startswith("/accounts/login/")
    assert client_for(reviewer).post(url, {"reason": "x"}).status_code == 403
    # A GET (a reopened address) goes to the review page with the form, and overrides nothing.
    assert client_for(coordinator).get(url)["Location"] == f"/review/pairs/{pair.pk}/"
    assert client_for(coordinator).put(url).status_code == 405
    pair.refresh_from_db()
    assert pair.similarity_status == "fail"


def test_the_api_overrides_for_coordinators_only(client, client_for, reviewer, coordinator):
    pair = failing_pair()
    url = f"/api/pairs/{pair.pk}/similarity-override/"
    assert client.post(url, {"reason": "x"}, content_type="application/json").status_code in (401, 403)
    assert client_for(reviewer).post(url, {"reason": "x"}, content_type="application/json").status_code == 403
    api = client_for(coordinator)
    assert api.get(url).status_code == 405
    refused = api.post(url, {"reason": ""}, content_type="application/json")
    assert refused.status_code == 400 and "Write why" in refused.json()["detail"]
    done = api.post(url, {"reason": "aerial pair, verified"}, content_type="application/json")
    assert done.status_code == 200
    assert done.json()["similarity_status"] == "override"
    assert Pair.objects.exportable().filter(pk=pair.pk).exists() is False  # still submitted, not yet accepted
    Pair.objects.filter(pk=pair.pk).update(status=Pair.Status.ACCEPTED)
    assert Pair.objects.exportable().filter(pk=pair.pk).exists()


def test_a_passing_pair_cannot_be_overridden(client_for, coordinator):
    pair = make_pair(status=Pair.Status.SUBMITTED, similarity=0.95)
    response = client_for(coordinator).post(
        f"/api/pairs/{pair.pk}/similarity-override/", {"reason": "why not"}, content_type="application/json"
    )
    assert response.status_code == 400
    pair.refresh_from_db()
    assert pair.similarity_override_reason == ""
