"""/synthetic/ pages: coordinators only; the form defines a sweep (a refused one comes back saying why), a sweep's
page shows its facts, pairs and heatmap, and the heatmap downloads as SVG, PNG and CSV; publishing queues its
experiment release."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotator.models import Job, Sweep
from tests.synthetic.sweep_fixtures import generated_sweep, run_units

pytestmark = pytest.mark.django_db


@pytest.fixture
def sweep(coordinator):
    return generated_sweep(coordinator, landing="accepted")


def urls(sweep) -> list[str]:
    base = f"/synthetic/{sweep.pk}/"
    return ["/synthetic/", base, base + "heatmap.svg", base + "heatmap.png", base + "results.csv"]


def test_pages_send_anonymous_users_to_login(client, sweep):
    for url in [*urls(sweep), f"/synthetic/{sweep.pk}/publish/"]:
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url


def test_pages_refuse_other_roles(client_for, annotator, reviewer, sweep):
    for user in (annotator, reviewer):
        for url in urls(sweep):
            assert client_for(user).get(url).status_code == 403, url
        assert client_for(user).post(f"/synthetic/{sweep.pk}/publish/").status_code == 403
        assert client_for(user).post("/synthetic/", {"family": "quantity"}).status_code == 403


def test_pages_refuse_wrong_methods(client_for, coordinator, sweep):
    page = client_for(coordinator)
    for url in urls(sweep)[1:]:
        assert page.post(url).status_code == 405, url
    publish = f"/synthetic/{sweep.pk}/publish/"
    # A GET of the form's target goes back to the page with the form (never a blank 405); other methods are refused.
    response = page.get(publish)
    assert response.status_code == 302 and response["Location"] == f"/synthetic/{sweep.pk}/"
    assert page.put(publish).status_code == 405
    assert not Job.objects.filter(kind=Job.Kind.EXPORT).exists()  # nothing was published by either


def test_the_form_defines_a_sweep_and_queues_its_job(client_for, coordinator):
    page = client_for(coordinator)
    form = {
        "family": "spatial",
        "factor_1": "displacement",
        "levels_1": "4 8 16",
        "factor_2": "object_count",
        "levels_2": "2, 6",
        "fixed": "object_size=20",
        "items_per_cell": "2",
        "seed": "3",
        "size": "128",
        "landing": "review",
        "experiment": "on",
        "idempotency_key": "k1",
    }
    response = page.post("/synthetic/", form)
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/synthetic/{sweep.pk}/"
    assert sweep.axes == [
        {"factor": "displacement", "levels": [4, 8, 16]},
        {"factor": "object_count", "levels": [2, 6]},
    ]
    assert sweep.factors["object_size"] == 20 and sweep.items_per_cell == 2 and sweep.experiment
    assert sweep.job.kind == Job.Kind.SWEEP and sweep.job.tasks.count() == 6 and sweep.job.total == 12
    page.post("/synthetic/", form)  # the same key again: no second sweep
    assert Sweep.objects.count() == 1
    run_units(sweep)
    html = page.get(f"/synthetic/{sweep.pk}/").content.decode()
    assert "12 submitted" in html and "displacement</strong> 4, 8, 16" in html and "No answers yet" in html


def test_a_refused_form_comes_back_saying_why(client_for, coordinator):
    page = client_for(coordinator)
    form = {"family": "quantity", "factor_1": "object_count", "levels_1": "4 200", "fixed": "object_size=60"}
    form.update(items_per_cell="1", seed="0", size="512", landing="review", factor_2="", levels_2="")
    response = page.post("/synthetic/", form)
    assert response.status_code == 302 and response["Location"] == "/synthetic/"
    html = page.get("/synthetic/").content.decode()
    assert "201 objects of 60 px do not fit a 512×512 image" in html and 'value="4 200"' in html
    assert not Sweep.objects.exists()


def test_the_sweep_page_and_its_downloads(client_for, coordinator, sweep):
    page = client_for(coordinator)
    page.get("/synthetic/")
    with CaptureQueriesContext(connection) as queries:
        html = page.get("/synthetic/").content.decode()
    assert len(queries) <= 8, [q["sql"] for q in queries]
    assert f'href="/synthetic/{sweep.pk}/"><strong>#{sweep.pk}</strong>' in html
    html = page.get(f"/synthetic/{sweep.pk}/").content.decode()
    assert "6 accepted" in html and "6 exportable" in html and "<svg" in html
    svg = page.get(f"/synthetic/{sweep.pk}/heatmap.svg")
    assert svg["Content-Type"] == "image/svg+xml" and b"No model run or study" in svg.content
    png = page.get(f"/synthetic/{sweep.pk}/heatmap.png")
    assert png["Content-Type"] == "image/png" and png.content.startswith(b"\x89PNG")
    csv = page.get(f"/synthetic/{sweep.pk}/results.csv").content.decode()
    assert csv.splitlines()[0] == "series,kind,object_size,correct,answered,accuracy,low,high"
    assert page.get("/synthetic/999999/").status_code == 404


def test_publishing_queues_the_experiment_release(client_for, coordinator, sweep):
    response = client_for(coordinator).post(f"/synthetic/{sweep.pk}/publish/", {"key": "p1"})
    job = Job.objects.filter(kind=Job.Kind.EXPORT).get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.result["options"]["sweep"] == sweep.pk and job.result["options"]["release"]
