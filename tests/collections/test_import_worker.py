"""A collection import queued through the API and run by a real Celery worker, whose images the similarity worker
then embeds (issue 27)."""

from __future__ import annotations

import pytest

from annotator.models import ImageEmbedding, Job, PairCandidate
from tests.collection_fixtures import levir_folder
from tests.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_real_worker_imports_a_collection_and_embeds_its_images(
    celery_worker_process, client_for, coordinator, tmp_path
):
    celery_worker_process("default,similarity")
    source = levir_folder(tmp_path / "levir")
    response = client_for(coordinator).post(
        "/api/collections/import/",
        {"source": str(source), "name": "levir_cd", "domain": "aerial"},
        content_type="application/json",
    )
    assert response.status_code == 202, response.json()
    job_id = response.json()["job_id"]
    job = wait_until(
        lambda: Job.objects.filter(pk=job_id, status__in=["succeeded", "failed"]).first(), 90, "the import job"
    )
    assert (job.status, job.errors, job.result["candidates"], job.result["images"]) == ("succeeded", [], 2, 4)
    embed = wait_until(
        lambda: Job.objects.filter(kind="similarity", status__in=["succeeded", "failed"]).first(), 120, "embedding"
    )
    assert embed.status == "succeeded", embed.errors
    images = {c.image_1_id for c in PairCandidate.objects.all()} | {c.image_2_id for c in PairCandidate.objects.all()}
    embedded = set(ImageEmbedding.objects.filter(error="").values_list("image_id", flat=True))
    assert images <= embedded and len(images) == 4
