"""Test fixtures: a cast of users with roles, storage in a temporary folder, fast password hashing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User


@pytest.fixture(autouse=True)
def fast_settings(settings, tmp_path):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.IMPORT_ROOTS = [tmp_path.resolve()]
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


def make_user(username: str, *roles: str) -> User:
    user = User.objects.create_user(username, password="password")
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def annotator(db):
    return make_user("alice", "annotator")


@pytest.fixture
def annotator2(db):
    return make_user("bob", "annotator")


@pytest.fixture
def reviewer(db):
    return make_user("rita", "reviewer")


@pytest.fixture
def coordinator(db):
    return make_user("cora", "coordinator")


@pytest.fixture
def stranger(db):
    """Logged in, but with no role."""
    return make_user("sam")


@pytest.fixture
def client_for(client):
    """client_for(user) logs the test client in as that user."""

    def login(user):
        client.force_login(user)
        return client

    return login
