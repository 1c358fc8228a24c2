"""The top bar's menus per role (subtlebench/navigation.py), the coordinator's home dashboard (annotator/home.py,
evaluation/results/dashboard.py) and a collection's page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from annotator.models import Job, Pair, Review
from annotator.picking import services as picking
from annotator.stats import services as stats
from evaluation.studies import services as studies
from subtlebench.navigation import nav_menus
from tests.factories import make_candidate, make_pair

pytestmark = pytest.mark.django_db


def menu_links(user, path="/") -> dict[str, list[str]]:
    return {menu["label"]: [link["label"] for link in menu["links"]] for menu in nav_menus(user, path)}


# --- The menus ----------------------------------------------------------------------------------------------------


def test_each_role_sees_only_its_own_menus(annotator, reviewer, coordinator, stranger):
    assert menu_links(annotator) == {"Make": ["Pick pairs", "Write captions"], "Operate": ["Jobs", "API", "API tokens"]}
    assert menu_links(reviewer) == {"Make": ["Review", "Data", "Check edits"], "Operate": ["Jobs", "API", "API tokens"]}
    coordinating = menu_links(coordinator)
    assert list(coordinating) == ["Make", "Sources", "Measure", "Operate"]
    assert coordinating["Sources"] == ["Videos", "Collections", "Mining", "Synthetic", "Edits"]
    assert coordinating["Measure"] == ["Overview", "Team analytics", "Releases", "Studies", "Models"]
    assert menu_links(stranger) == {"Operate": ["API", "API tokens"]}


def test_the_page_it_is_on_is_marked_in_its_menu(client_for, coordinator):
    html = client_for(coordinator).get("/captions/review/").content.decode()
    # The caption review queue is Review's (a longer prefix than Caption batches' /captions/).
    current = re.findall(r'<a href="([^"]+)" aria-current="page">', html)
    assert current == ["/review/"]
    assert re.search(r'id="nav-make"><details>\s*<summary class="current" aria-current="true">Make', html)
    assert html.count('aria-current="true"') == 1
    page = client_for(coordinator).get("/collections/").content.decode()
    assert re.findall(r'<a href="([^"]+)" aria-current="page">', page) == ["/collections/"]


# --- The coordinator's dashboard ----------------------------------------------------------------------------------


@pytest.fixture
def benchmark(annotator):
    """Two temporal x natural pairs in the benchmark, one in review, one drafted; one existence x aerial in review;
    a target of 4 temporal x natural and 2 quality x gaming."""
    for _ in range(2):
        make_pair(category="temporal", domain="natural")
    make_pair(category="temporal", domain="natural", status=Pair.Status.SUBMITTED, author=annotator)
    make_pair(category="temporal", domain="natural", status=Pair.Status.DRAFT, author=annotator)
    make_pair(category="existence", domain="aerial", status=Pair.Status.SUBMITTED, author=annotator)
    stats.targets_set(counts={("temporal", "natural"): 4, ("quality", "gaming"): 2})


def test_the_dashboard_shows_each_cell_against_its_target(client_for, coordinator, benchmark):
    response = client_for(coordinator).get("/home/dashboard/")
    state = response.context["dashboard"]["state"]
    assert state["domains"] == ["natural", "gaming", "aerial"]
    cells = {(row["category"], c["domain"]): c for row in state["rows"] for c in row["cells"]}
    temporal = cells[("temporal", "natural")]
    assert (temporal["in_benchmark"], temporal["target"], temporal["percent"]) == (2, 4, 50)
    assert (temporal["in_review"], temporal["drafts"]) == (1, 1)
    assert cells[("existence", "aerial")]["in_review"] == 1 and cells[("existence", "aerial")]["target"] is None
    assert cells[("quality", "gaming")]["target"] == 2 and cells[("quality", "gaming")]["in_benchmark"] == 0
    assert cells[("temporal", "gaming")]["empty"]
    assert (state["in_benchmark"], state["in_review"], state["drafts"], state["to_go"]) == (2, 2, 1, 4)
    text = " ".join(re.sub(r"<[^>]+>", "", response.content.decode()).split())
    assert "2 in the benchmark of 6 targeted (4 to go) · 2 in review · 1 drafts" in text


def test_the_dashboard_says_what_changed_since_the_latest_release(client_for, coordinator):
    from tests.modeleval_release_factories import make_release

    released = [make_pair(), make_pair()]
    make_release([(released[0], "test", False), (released[1], "test", False)])
    make_pair()  # accepted since
    picking.pair_reopen(pair=released[0], by=coordinator, reason="The answer is wrong.")  # leaves the benchmark
    dashboard = client_for(coordinator).get("/home/dashboard/").context["dashboard"]
    assert dashboard["release"].name == "v1"
    assert dashboard["since_release"] == {"added": 1, "left": 1}


def test_the_dashboard_lists_jobs_that_need_someone(client_for, coordinator):
    now = timezone.now()
    failed = Job.objects.create(kind=Job.Kind.IMPORT, title="Import failed", status=Job.Status.FAILED, finished=now)
    Job.objects.create(
        kind=Job.Kind.IMPORT, title="Old failure", status=Job.Status.FAILED, finished=now - timedelta(days=30)
    )
    Job.objects.create(kind=Job.Kind.IMPORT, title="Fine", status=Job.Status.SUCCEEDED, finished=now)
    attention = client_for(coordinator).get("/home/dashboard/").context["dashboard"]["attention"]
    assert [(entry["job"], entry["why"]) for entry in attention] == [(failed, "failed")]


def test_the_dashboard_is_for_coordinators_and_only_answers_get(client, client_for, annotator, coordinator):
    assert client.get("/home/dashboard/").status_code == 302
    assert client.get("/home/measure/").status_code == 302
    assert client_for(annotator).get("/home/dashboard/").status_code == 403
    assert client_for(annotator).get("/home/measure/").status_code == 403
    assert client_for(coordinator).post("/home/dashboard/").status_code == 405
    assert client_for(coordinator).post("/home/measure/").status_code == 405


def test_the_coordinators_home_loads_the_dashboard_and_links_every_section(client_for, coordinator):
    html = client_for(coordinator).get("/").content.decode()
    assert 'hx-get="/home/dashboard/"' in html and 'hx-get="/home/measure/"' in html
    goto = html[html.index('id="goto"') :]
    for href in ("/collections/", "/mining/", "/synthetic/", "/releases/", "/models/", "/videos/", "/studies/"):
        assert f'href="{href}"' in goto


def test_the_measuring_part_shows_studies_taking_answers_and_model_runs(client_for, coordinator):
    from evaluation.runs.services import evaluation_start
    from tests.factories import make_video
    from tests.modeleval_release_factories import make_release

    for _ in range(2):
        make_pair()
    study = studies.study_create(name="Pilot", fraction=1.0, practice_count=0, raters_per_item=2)
    archived = studies.study_create(name="Old", fraction=1.0, practice_count=0)
    archived.archived_at = timezone.now()
    archived.save()
    from annotator.llm.endpoints import endpoint_create

    endpoint = endpoint_create(user=coordinator, name="vlm", base_url="http://127.0.0.1:9/v1", model_id="m")
    release = make_release([(make_pair(video=make_video(frames=2)), "test", False)], number=1)
    run = evaluation_start(endpoint=endpoint, user=coordinator, release=release, send=False)
    response = client_for(coordinator).get("/home/measure/")
    rows = response.context["studies_running"]
    assert [row["study"] for row in rows] == [study]
    assert rows[0]["progress"]["responses"] == 0 and rows[0]["progress"]["responses_needed"] == 4
    assert [r.pk for r in response.context["runs"]] == [run.pk]
    html = response.content.decode()
    assert "Pilot" in html and "Old" not in html and f"#{run.pk}" in html


# --- Annotators and reviewers: their queues and what came back ------------------------------------------------------


def test_a_reviewer_sees_what_came_back_after_their_rejection(client_for, reviewer, annotator):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    picking.pair_review(pair=pair, reviewer=reviewer, decision="reject", reason="Wrong answer.", version=pair.version)
    make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    Pair.objects.filter(pk=pair.pk).update(status=Pair.Status.SUBMITTED)  # fixed and submitted again
    assert Review.objects.filter(pair=pair, reviewer=reviewer).exists()
    response = client_for(reviewer).get("/")
    assert response.context["waiting"]["counts"]["came_back"] == 1
    assert response.context["waiting"]["counts"]["pairs_to_review"] == 2
    assert 'id="count-came-back"' in response.content.decode()
    assert 'hx-get="/home/dashboard/"' not in response.content.decode()


def test_an_annotator_sees_their_queues_and_their_rejections(client_for, annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    picking.pair_review(pair=pair, reviewer=reviewer, decision="reject", reason="Look again.", version=pair.version)
    make_candidate()
    response = client_for(annotator).get("/")
    counts = response.context["waiting"]["counts"]
    assert counts["returned"] == 1 and counts["pairs_to_author"] == 1
    html = response.content.decode()
    assert "Look again." in html and 'href="/work/"' in html and 'href="/videos/"' not in html


# --- A collection's page ------------------------------------------------------------------------------------------


def test_a_collection_page_shows_its_images_pairs_candidates_terms_and_imports(
    client_for, coordinator, django_assert_max_num_queries
):
    candidate = make_candidate(source="levir_cd", source_id="scene_7")
    pair = make_pair(source="levir_cd")
    Pair.objects.filter(pk=pair.pk).update(image_1=candidate.image_1, image_2=candidate.image_2)
    Job.objects.create(
        kind=Job.Kind.IMPORT,
        title="Import",
        status=Job.Status.SUCCEEDED,
        result={"collection": "levir_cd", "source": "/data/levir", "images_new": 2},
    )
    Job.objects.create(kind=Job.Kind.IMPORT, title="Other", result={"collection": "mvtec", "source": "/data/mvtec"})
    client = client_for(coordinator)
    client.get(f"/collections/{candidate.collection_id}/")
    with django_assert_max_num_queries(16):
        response = client.get(f"/collections/{candidate.collection_id}/")
    html = response.content.decode()
    assert response.context["image_count"] == 2
    assert "levir_cd/scene_7" in html and f"/review/pairs/{pair.pk}/" in html
    assert "/data/levir" in html and "/data/mvtec" not in html
    assert 'id="collection-license"' in html and "Archive" in html and "Delete" in html


def test_a_collection_page_is_for_coordinators(client, client_for, annotator):
    collection = make_candidate().collection
    assert client.get(f"/collections/{collection.pk}/").status_code == 302
    assert client_for(annotator).get(f"/collections/{collection.pk}/").status_code == 403
    assert client_for(annotator).post(f"/collections/{collection.pk}/").status_code in (403, 405)
