"""End to end: a real Celery worker consuming the `similarity` queue embeds a sampled video and scores its pair,
only under the active embedding model."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from annotator.models import ImageEmbedding, Job
from annotator.similarity.services import NO_ACTIVE_MODEL, embedding_model_active, video_queue_embeddings
from tests import similarity_fixtures
from tests.conftest import wait_until
from tests.factories import make_pair, make_video

no_dinov3 = similarity_fixtures.no_dinov3
other_dinov3_dir = similarity_fixtures.other_dinov3_dir

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def finished(job: Job) -> bool:
    job.refresh_from_db()
    return not job.is_active


def test_a_similarity_worker_waits_for_an_active_model_refuses_other_weights_then_embeds(
    celery_worker_process, no_dinov3, tiny_dinov3_dir, other_dinov3_dir, settings
):
    video = make_video(frames=5)
    pair = make_pair(video=video, similarity=None, similarity_model="")

    # This worker's DINOV3_MODEL_DIR holds other weights than the model that will be activated.
    worker = celery_worker_process(queues="similarity", DINOV3_MODEL_DIR=str(other_dinov3_dir))
    job = video_queue_embeddings(video=video)
    wait_until(lambda: finished(job), 60, "the job without a model to finish")
    assert job.status == Job.Status.FAILED
    assert NO_ACTIVE_MODEL in job.errors[0]

    call_command("check_dinov3", "--activate", str(tiny_dinov3_dir))
    active = embedding_model_active(fresh=True)
    job = video_queue_embeddings(video=video)
    wait_until(lambda: finished(job), 60, "the job under other weights to finish")
    assert job.status == Job.Status.FAILED
    assert "refusing to embed" in job.errors[0] and active.fingerprint in job.errors[0]
    assert not ImageEmbedding.objects.exists()
    worker.terminate()
    worker.wait(timeout=20)
    log = (settings.MEDIA_ROOT.parent / "worker-0.log").read_text()
    assert NO_ACTIVE_MODEL in log and "refusing to embed" in log

    celery_worker_process(queues="similarity", DINOV3_BATCH_SIZE="2")  # reads the active row's folder
    job = video_queue_embeddings(video=video)
    wait_until(lambda: finished(job), 120, "the similarity job to finish")
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert (job.total, job.done) == (5, 5)
    assert job.result["embedded"] == 5 and job.result["pairs_scored"] == 1
    assert job.result["model"] == active.fingerprint
    assert ImageEmbedding.objects.filter(vector__isnull=False, fingerprint=active.fingerprint).count() == 5
    pair.refresh_from_db()
    assert pair.similarity_status == "pass"
    assert pair.similarity_model == active.fingerprint
