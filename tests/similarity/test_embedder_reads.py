"""Reads that never return cannot hold an embedding job, nor the rows it locks: a pipe in place of a frame fails at
once, a hung read fails after its deadline, and a pair can reference an image while that image is being embedded."""

from __future__ import annotations

import os
import threading

import numpy as np
import psycopg
import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import OperationalError, connection

from annotator.models import ImageEmbedding, Job, Pair
from annotator.similarity.services import embedding_job_create, embeddings_compute
from tests import similarity_fixtures
from tests.factories import make_image

dinov3 = similarity_fixtures.dinov3

pytestmark = [pytest.mark.django_db, pytest.mark.torch]


def stored(ids):
    rows = ImageEmbedding.objects.filter(image_id__in=ids, vector__isnull=False)
    return {row.image_id for row in rows}


def test_a_named_pipe_in_place_of_a_frame_fails_alone_at_once_and_the_rest_embed(dinov3):
    images = [make_image(shift=i) for i in range(3)]
    piped = images[1]
    path = default_storage.path(piped.file.name)
    os.unlink(path)
    os.mkfifo(path)  # opening it to read would wait for a writer forever

    job = embeddings_compute(job=embedding_job_create(title="test"), image_ids=[image.pk for image in images])

    assert job.status == Job.Status.SUCCEEDED
    [error] = job.errors
    assert f"image {piped.pk}" in error and "is not a regular file (a named pipe)" in error
    assert stored([image.pk for image in images]) == {images[0].pk, images[2].pk}
    assert "named pipe" in ImageEmbedding.objects.get(image=piped).error


def test_a_read_that_never_returns_fails_after_its_deadline_and_the_batch_goes_on(dinov3):
    from annotator.similarity.embedder import Embedder

    images = [make_image(shift=i) for i in range(2)]
    paths = [default_storage.path(image.file.name) for image in images]
    released = threading.Event()

    def hung_read():
        released.wait()  # a network mount that stopped answering
        return b""

    embedder = Embedder.load(dinov3, batch_size=3, decode_threads=2, decode_timeout=0.5)
    try:
        batches = list(embedder.embed([paths[0], hung_read, paths[1]]))
    finally:
        released.set()  # the abandoned thread ends with the test

    [batch] = batches
    assert batch.indices == [0, 2]
    assert batch.vectors.shape == (2, 64) and np.isfinite(batch.vectors).all()
    assert set(batch.failures) == {1}
    assert "took longer than 0.5 s" in batch.failures[1]
    assert embedder.abandoned == 1


class InsertsAPairMidway:
    """An embedder that, while the job holds its chunk's images, makes a pair on one of them from another
    connection (another process would), as `seed_demo` does beside a running worker."""

    def __init__(self, image_1, image_2):
        self.image_1, self.image_2 = image_1, image_2
        self.outcome = None

    def make_pair(self):
        try:  # a thread: its own database connection
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = '10s'")
            Pair.objects.create(image_1=self.image_1, image_2=self.image_2, category="state", source_id="midway")
            self.outcome = "inserted"
        except OperationalError as error:
            if not isinstance(error.__cause__, psycopg.errors.LockNotAvailable):
                raise
            self.outcome = "blocked by the embedding transaction's lock"
        finally:
            connection.close()

    def embed(self, sources):
        other = threading.Thread(target=self.make_pair)
        other.start()
        other.join()
        yield from ()


@pytest.mark.django_db(transaction=True)
def test_an_image_being_embedded_does_not_block_a_pair_that_references_it(dinov3):
    assert settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    images = [make_image(shift=i) for i in range(2)]
    embedder = InsertsAPairMidway(*images)

    embeddings_compute(
        job=embedding_job_create(title="test"), image_ids=[image.pk for image in images], embedder=embedder
    )

    assert embedder.outcome == "inserted"
    assert Pair.objects.filter(source_id="midway", image_1=images[0]).exists()


def test_a_decompression_bomb_in_place_of_an_image_fails_alone_from_its_header(dinov3):
    from tests.test_bounded_readers import bomb_png

    images = [make_image(shift=i) for i in range(3)]
    bomb = images[1]
    with open(default_storage.path(bomb.file.name), "wb") as handle:
        handle.write(bomb_png())  # 30000x30000 by its header: 2.7 GB if decoded

    job = embeddings_compute(job=embedding_job_create(title="test"), image_ids=[image.pk for image in images])

    assert job.status == Job.Status.SUCCEEDED
    [error] = job.errors
    assert f"image {bomb.pk}" in error and "900000000 pixels by its header" in error
    assert "IMPORT_MAX_IMAGE_PIXELS" in error
    assert stored([image.pk for image in images]) == {images[0].pk, images[2].pk}


def test_an_s3_outage_while_embedding_stops_the_job_for_a_pause_and_marks_no_image_failed(
    dinov3, s3_storage, s3_server, settings
):
    """Media in a bucket that stopped answering: not "cannot decode image" on every image (they are fine), but the
    outage raised for the unit to pause (annotator.jobs.services.job_task_failed); a later run embeds them all."""
    from annotator.jobs.outages import STORAGE, outage_of
    from tests.cut_proxy import CutProxy

    settings.S3_MAX_ATTEMPTS = 1
    proxy = CutProxy(int(s3_server.rsplit(":", 1)[1]))
    settings.S3_ENDPOINT_URL = proxy.url
    try:
        images = [make_image(shift=i) for i in range(2)]
        ids = [image.pk for image in images]
        job = embedding_job_create(title="test")
        proxy.cut_now()
        with pytest.raises(Exception) as raised:
            embeddings_compute(job=job, image_ids=ids)
        assert outage_of(raised.value) == STORAGE
        job.refresh_from_db()
        assert (job.status, job.errors) == (Job.Status.RUNNING, [])
        assert not ImageEmbedding.objects.filter(image_id__in=ids).exclude(error="").exists()

        proxy.restore()
        job = embeddings_compute(job=job, image_ids=ids)
    finally:
        proxy.close()
    assert (job.status, job.errors, stored(ids)) == (Job.Status.SUCCEEDED, [], set(ids))
