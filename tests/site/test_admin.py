"""Every model of the apps is in the Django admin, and every change list opens (columns and filters render)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User

from tests.factories import make_pair

pytestmark = pytest.mark.django_db


def test_every_model_of_the_apps_is_registered():
    models = [m for name in ("annotator", "evaluation", "subtlebench") for m in apps.get_app_config(name).get_models()]
    missing = [m.__name__ for m in models if m not in admin.site._registry]
    assert missing == []


def test_every_change_list_opens_for_a_superuser(client):
    make_pair()  # a few rows, so list_display columns are rendered
    client.force_login(User.objects.create_superuser("root", password="password"))
    for model in admin.site._registry:
        if model._meta.app_label not in ("annotator", "evaluation", "subtlebench"):
            continue
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        response = client.get(url)
        assert response.status_code == 200, url
