"""Every domain (issue 27): the forms, filters and commands that once offered only natural and gaming take all six."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.datamanager.tables import PAIRS, VIDEOS
from annotator.videos.views import UploadForm
from benchmark.taxonomy import DOMAINS

pytestmark = pytest.mark.django_db


def choices_of(table, name):
    return [value for value, _ in next(f for f in table.filters if f.name == name).choices]


def test_the_data_manager_filters_offer_every_domain():
    assert choices_of(VIDEOS, "domain") == list(DOMAINS)
    assert choices_of(PAIRS, "domain") == list(DOMAINS)


def test_the_upload_form_and_the_import_api_take_an_aerial_video(client_for, coordinator, tmp_path):
    assert [value for value, _ in UploadForm.base_fields["domain"].choices] == list(DOMAINS)
    (tmp_path / "empty").mkdir()
    response = client_for(coordinator).post(
        "/api/videos/import/", {"path": str(tmp_path / "empty"), "domain": "aerial"}, content_type="application/json"
    )
    assert response.status_code == 400 and "domain" not in response.json()["errors"]  # the folder, not the domain


def test_import_videos_takes_every_domain(tmp_path):
    (tmp_path / "empty").mkdir()
    for domain in DOMAINS:
        with pytest.raises(CommandError, match="contains no video files"):  # past the domain check
            call_command("import_videos", str(tmp_path / "empty"), "--domain", domain)
    with pytest.raises(CommandError, match="invalid choice: 'space'"):
        call_command("import_videos", str(tmp_path / "empty"), "--domain", "space")
