"""seed_demo with a model it cannot use: it stops before it makes any pair or release, naming the folder and why;
and the demo release is skipped with the reason, never made empty, when nothing can be exported."""

from __future__ import annotations

import io

import pytest

from annotator.models import Job, Release, ReleaseReservation
from demo.releases import seed_demo_release
from demo.similarity import DemoModelUnusable, seed_demo_similarity
from tests import similarity_fixtures
from tests.export_fixtures import make_pair

pytestmark = pytest.mark.django_db
dinov3 = similarity_fixtures.dinov3


def test_seed_demo_stops_on_a_dinov3_folder_it_cannot_read_before_any_release(dinov3, settings, tmp_path):
    bad = tmp_path / "bad-dinov3"
    bad.mkdir()
    (bad / "config.json").write_text("not json")
    settings.DINOV3_MODEL_DIR = str(bad)
    make_pair(similarity=None, similarity_model="")
    with pytest.raises(DemoModelUnusable) as stopped:
        seed_demo_similarity(io.StringIO())
    said = str(stopped.value)
    assert f"DINOV3_MODEL_DIR={bad}: cannot read the active model's weights: {bad}/config.json: not a valid" in said
    assert "Nothing was published" in said
    assert not Job.objects.filter(kind=Job.Kind.SIMILARITY).exists() and not Release.objects.exists()


def test_the_demo_release_is_skipped_not_empty_when_nothing_can_be_exported(settings):
    make_pair(similarity=None, similarity_model="")  # pending: not exportable
    said = io.StringIO()
    assert seed_demo_release(said) is None
    assert "Demo release skipped: Nothing to publish: no pair is accepted and passes the similarity check" in (
        said.getvalue()
    )
    assert not Release.objects.exists() and not ReleaseReservation.objects.exists()
