"""The real services the suite stands on: an S3 protocol server, a Celery worker process."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from annotator.models import Pair
from tests.factories import make_pair


def test_s3_storage_round_trips_through_the_moto_server(s3_storage):
    from subtlebench.storage import s3_client

    name = default_storage.save("frames/x/000001.jpg", ContentFile(b"abc"))
    assert default_storage.exists(name)
    assert default_storage.open(name).read() == b"abc"
    assert default_storage.size(name) == 3
    listed = s3_client().list_objects_v2(Bucket=s3_storage)["Contents"]
    assert [obj["Key"] for obj in listed] == ["media/frames/x/000001.jpg"]
    assert default_storage.url(name).startswith("http://127.0.0.1:")
    default_storage.delete(name)
    assert not default_storage.exists(name)


def test_s3_storage_open_of_a_missing_key_raises_file_not_found(s3_storage):
    with pytest.raises(FileNotFoundError):
        default_storage.open("nope.jpg")


@pytest.mark.django_db
def test_factories_make_a_pair_with_two_real_images():
    pair = make_pair(status=Pair.Status.ACCEPTED)
    assert pair.image_1.file.read()[:2] == b"\xff\xd8"
    assert pair.options == ["second image", "first image"]
