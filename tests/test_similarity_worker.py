"""End to end: a real Celery worker consuming the `similarity` queue embeds a sampled video and scores its pair."""

from __future__ import annotations

import pytest

from annotator.models import ImageEmbedding, Job
from annotator.similarity.services import video_queue_embeddings
from tests import similarity_fixtures
from tests.conftest import wait_until
from tests.factories import make_pair, make_video

tiny_dinov3_dir = similarity_fixtures.tiny_dinov3_dir

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def finished(job: Job) -> bool:
    job.refresh_from_db()
    return not job.is_active


def test_a_similarity_worker_fails_clearly_without_a_model_then_embeds_once_one_is_set(
    celery_worker_process, tiny_dinov3_dir, settings, tmp_path
):
    no_demo = str(tmp_path / "no-demo-model")
    settings.DINOV3_MODEL_DIR = str(tiny_dinov3_dir)
    settings.DINOV3_DEMO_MODEL_DIR = no_demo
    video = make_video(frames=5)
    pair = make_pair(video=video, similarity=None, similarity_model="")

    worker = celery_worker_process(queues="similarity", DINOV3_MODEL_DIR="", DINOV3_DEMO_MODEL_DIR=no_demo)
    job = video_queue_embeddings(video=video)
    wait_until(lambda: finished(job), 60, "the job without a model to finish")
    assert job.status == Job.Status.FAILED
    assert "DINOV3_MODEL_DIR is not set" in job.errors[0]
    assert not ImageEmbedding.objects.exists()
    worker.terminate()
    worker.wait(timeout=20)
    log = (settings.MEDIA_ROOT.parent / "worker-0.log").read_text()
    assert "DINOV3_MODEL_DIR is not set" in log

    celery_worker_process(
        queues="similarity",
        DINOV3_MODEL_DIR=str(tiny_dinov3_dir),
        DINOV3_DEMO_MODEL_DIR=no_demo,
        DINOV3_BATCH_SIZE="2",
    )
    job = video_queue_embeddings(video=video)
    wait_until(lambda: finished(job), 120, "the similarity job to finish")
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert (job.total, job.done) == (5, 5)
    assert job.result["embedded"] == 5 and job.result["pairs_scored"] == 1
    assert ImageEmbedding.objects.filter(vector__isnull=False).count() == 5
    pair.refresh_from_db()
    assert pair.similarity_status == "pass"
    assert pair.similarity_model == job.result["model"]
