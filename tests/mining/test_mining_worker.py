"""End to end: a real Celery worker that consumes only the `similarity` queue runs a mining job started from the
page, and the candidates it wrote are in the data manager."""

from __future__ import annotations

import pytest

from annotator.models import Job, PairCandidate
from tests.conftest import wait_until
from tests.mining.test_mining_job import collection_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_similarity_worker_runs_a_mining_job_started_from_the_page(celery_worker_process, client_for, coordinator):
    collection, images = collection_world()
    celery_worker_process(queues="similarity")
    response = client_for(coordinator).post("/mining/", {"scope": str(collection.pk), "k": "0"})
    job = Job.objects.get(kind=Job.Kind.MINE)
    assert response["Location"] == f"/jobs/{job.pk}/"

    def finished():
        job.refresh_from_db()
        return not job.is_active

    wait_until(finished, 120, "the mining job to finish")
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert job.done == job.total and job.total >= 2
    assert job.tasks.get().worker.startswith("test")  # run by the worker, not in this process
    pair = (images[0].pk, images[1].pk)
    assert pair in set(PairCandidate.objects.filter(job=job).values_list("image_1_id", "image_2_id"))
    assert job.result["candidates"] == PairCandidate.objects.filter(job=job, origin="mined").count() >= 4
    table = client_for(coordinator).get(f"/tables/candidates/?job={job.pk}")
    assert f'<strong class="dm-total">{job.result["candidates"]}</strong>' in table.content.decode()
    page = client_for(coordinator).get(f"/jobs/{job.pk}/")
    assert f"{job.result['candidates']} candidates from 8 embedded images" in page.content.decode()
