"""Models evaluate a release: a run in the app sends each item as released (image order, options) and stores one
result per release item; an imported results file is matched by the release's own item ids, unknown ids counted
and stored nowhere; correcting a pair afterwards changes no stored result and no comparison."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from annotator.llm.endpoints import endpoint_create
from annotator.models import Category, Pair
from benchmark.protocol import Item, shuffle_options
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.results.compare import release_compare
from evaluation.runs.naming import run_name
from evaluation.runs.results_files import model_results_import, results_file
from evaluation.runs.selectors import model_answers_on_release, model_failures_on_release
from evaluation.runs.services import evaluation_run, evaluation_start
from subtlebench.errors import Invalid
from tests.factories import make_pair
from tests.model_server import ModelServer
from tests.modeleval_release_factories import make_release

pytestmark = pytest.mark.django_db


def second_image_if_offered(question: str, options: list[str]) -> str:
    """The server's rule: "second image" where it is an option, else the first option shown."""
    return "second image" if "second image" in options else options[0]


@pytest.fixture
def server():
    server = ModelServer(policy=second_image_if_offered).start()
    yield server
    server.stop()


@pytest.fixture
def world():
    pairs = {
        "kept": make_pair(category=Category.TEMPORAL),  # answer "second image", shown as is
        # Released with its images traded: its answer is "first image" there.
        "swapped": make_pair(category=Category.TEMPORAL, question="Which image was taken after the other?"),
        "attribute": make_pair(
            category=Category.ATTRIBUTE,
            question="What changed about the mug?",
            answer="its colour",
            distractors=["its size", "its texture"],
        ),
        "val": make_pair(category=Category.QUALITY, question="Which image has better quality?"),
    }
    release = make_release(
        [
            (pairs["kept"], "test", False),
            (pairs["swapped"], "test", True),
            (pairs["attribute"], "test", False),
            (pairs["val"], "val", False),
        ]
    )
    return {"pairs": pairs, "release": release, "items": {i.pair_id: i for i in release.items.all()}}


def run_on_release(server, coordinator, release, split="test", name="tiny"):
    endpoint = endpoint_create(
        user=coordinator, name=name, base_url=server.base_url, model_id="tiny-vlm", concurrency=2, timeout_s=5
    )
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, source="release", release=release, split=split)
    return evaluation_run(evaluation_id=evaluation.pk)


def test_a_run_on_a_release_stores_one_result_per_item_of_its_split_as_released(world, coordinator, server):
    release, pairs, items = world["release"], world["pairs"], world["items"]
    evaluation = run_on_release(server, coordinator, release)
    assert evaluation.release == release and evaluation.source == ModelEvaluation.Source.RELEASE
    results = {r.release_item_id: r for r in evaluation.results.all()}
    test_items = [items[pairs[name].pk] for name in ("kept", "swapped", "attribute")]
    assert set(results) == {item.pk for item in test_items}  # the val item is not in the test split
    # The swapped item was asked with its released images (the pair's second image first) and its released
    # answer ("first image"): the server's "second image" is wrong there, right on the item shown as is.
    assert results[items[pairs["kept"].pk].pk].is_correct is True
    assert results[items[pairs["swapped"].pk].pk].is_correct is False
    asked = {seen.question: seen for seen in server.requests if seen.path.endswith("/chat/completions")}
    swapped_pair = pairs["swapped"]
    sent = [server.image_bytes(url) for url in asked[swapped_pair.question].images]
    stored = [image.file.open("rb").read() for image in (swapped_pair.image_2, swapped_pair.image_1)]
    assert sent == stored and stored[0] != stored[1]
    # The options are the seeded shuffle of the released answer and distractors, in the file's order.
    expected = [
        Item(
            question_id=item.item_id,
            question=item.record["question"],
            answer=item.record["answer"],
            distractors=item.record["distractors"],
            category=item.category,
            domain=item.domain,
            image_1="",
            image_2="",
        )
        for item in test_items
    ]
    shuffle_options(expected, evaluation.seed)
    for item, shown in zip(test_items, expected, strict=True):
        assert results[item.pk].options == shown.options and results[item.pk].question_id == item.item_id
        assert results[item.pk].correct_letter == shown.correct_letter
    attribute = items[pairs["attribute"].pk]
    assert model_answers_on_release(release) == {
        run_name(evaluation): [
            (items[pairs["kept"].pk].item_id, True),
            (items[pairs["swapped"].pk].item_id, False),
            (attribute.item_id, results[attribute.pk].is_correct),
        ]
    }
    assert model_failures_on_release(release) == {run_name(evaluation): 0}


def results_content(entries) -> bytes:
    return json.dumps({"model": "gpt-x", "questions": entries}).encode()


def test_an_imported_file_is_matched_by_the_releases_item_ids_and_unknown_ids_are_reported(world, coordinator):
    release, pairs, items = world["release"], world["pairs"], world["items"]
    kept, swapped = items[pairs["kept"].pk], items[pairs["swapped"].pk]
    content = results_content(
        [
            {"question_id": kept.item_id, "is_correct": True, "predicted_answer": "B", "correct_letter": "B"},
            {"question_id": swapped.item_id, "is_correct": False, "predicted_answer": "A", "correct_letter": "B"},
            {"question_id": "temporal_yt8m_nowhere_1", "is_correct": True},
            {"question_id": f"{kept.item_id}x", "is_correct": True},
        ]
    )
    evaluation = model_results_import(
        user=coordinator, release=release, name="gpt-x", content=content, file_name="mc.json"
    )
    assert evaluation.source == ModelEvaluation.Source.IMPORT and evaluation.endpoint is None
    assert evaluation.parameters["unknown"] == 2
    assert evaluation.parameters["unknown_ids"] == ["temporal_yt8m_nowhere_1", f"{kept.item_id}x"]
    rows = {r.release_item_id: (r.is_correct, r.predicted_letter, r.pair_id) for r in evaluation.results.all()}
    assert rows == {kept.pk: (True, "B", pairs["kept"].pk), swapped.pk: (False, "A", pairs["swapped"].pk)}
    assert ModelItemResult.objects.filter(question_id__contains="nowhere").count() == 0
    assert (evaluation.items, evaluation.answered, evaluation.correct) == (2, 2, 1)
    assert model_answers_on_release(release)[run_name(evaluation)] == [(kept.item_id, True), (swapped.item_id, False)]
    # Its results file names the release's items with their released questions.
    document = results_file(evaluation)
    assert [q["question_id"] for q in document["questions"]] == [kept.item_id, swapped.item_id]


def test_an_imported_file_with_an_id_twice_or_no_known_id_is_refused_and_stores_nothing(world, coordinator):
    release, kept = world["release"], world["items"][world["pairs"]["kept"].pk]
    twice = results_content([{"question_id": kept.item_id, "is_correct": True}] * 2)
    with pytest.raises(Invalid, match="appears twice"):
        model_results_import(user=coordinator, release=release, name="m", content=twice, file_name="mc.json")
    none = results_content([{"question_id": "attribute_x_1", "is_correct": True}])
    with pytest.raises(Invalid, match=r"none of its 1 question ids is an item of release v1 \(first: attribute_x_1\)"):
        model_results_import(user=coordinator, release=release, name="m", content=none, file_name="mc.json")
    with pytest.raises(Invalid, match="entry 0: missing field is_correct"):
        model_results_import(
            user=coordinator, release=release, name="m", content=results_content([{"question_id": "a"}])
        )
    assert ModelEvaluation.objects.count() == 0 and ModelItemResult.objects.count() == 0


def test_correcting_a_pair_after_the_release_changes_no_result_and_no_comparison(world, coordinator, server):
    release, pairs = world["release"], world["pairs"]
    run_on_release(server, coordinator, release)
    kept = world["items"][pairs["kept"].pk]
    content = results_content([{"question_id": kept.item_id, "is_correct": False}])
    model_results_import(user=coordinator, release=release, name="gpt-x", content=content)

    def snapshot():
        rows = ModelItemResult.objects.order_by("pk").values_list(
            "release_item_id", "question_id", "options", "correct_letter", "is_correct"
        )
        table = release_compare(release=release)
        figures = [(row["label"], row["categories"], row["micro"], row["macro"], row["own"]) for row in table["runs"]]
        return list(rows), figures, table["common"], model_answers_on_release(release)

    before = snapshot()
    assert before[2] == 1  # only the kept item was answered by both runs
    Pair.objects.filter(pk=pairs["swapped"].pk).update(
        question="Which image was taken first?", answer="first image", distractors=["second image"]
    )
    Pair.objects.filter(pk=pairs["kept"].pk).update(category=Category.STATE)
    assert snapshot() == before


def test_the_comparison_counts_only_items_every_chosen_run_answered(world, coordinator, server):
    release, items, pairs = world["release"], world["items"], world["pairs"]
    app = run_on_release(server, coordinator, release)
    attribute = items[pairs["attribute"].pk]
    content = results_content([{"question_id": attribute.item_id, "is_correct": True}])
    imported = model_results_import(user=coordinator, release=release, name="gpt-x", content=content)
    table = release_compare(release=release)
    assert table["common"] == 1
    by_label = {row["label"]: row for row in table["runs"]}
    assert by_label[run_name(imported)]["micro"] == {"correct": 1, "n": 1, "accuracy": 1.0}
    app_right = app.results.get(release_item=attribute).is_correct
    tiny = by_label[run_name(app)]
    assert tiny["micro"]["correct"] == int(app_right) and tiny["own"]["n"] == 3
    alone = release_compare(release=release, run_ids=[app.pk])
    assert alone["common"] == 3 and [row["run"].pk for row in alone["runs"]] == [app.pk]
    assert imported.pk not in [row["run"].pk for row in alone["runs"]]


@pytest.mark.parametrize("url", ["/models/compare/", "/models/import/"])
def test_the_release_pages_are_for_coordinators_only(client, client_for, annotator, url):
    assert client.get(url).status_code == 302
    assert client_for(annotator).get(url).status_code == 403


def test_the_compare_page_refuses_a_post_and_a_bad_run(client_for, coordinator, world):
    client = client_for(coordinator)
    assert client.post("/models/compare/").status_code == 405
    assert client.get("/models/compare/", {"run": "nope"}).status_code == 400


def test_a_file_imported_from_the_page_names_its_unknown_ids_and_shows_on_the_compare_page(
    client_for, coordinator, world
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    release, kept = world["release"], world["items"][world["pairs"]["kept"].pk]
    content = results_content(
        [{"question_id": kept.item_id, "is_correct": True}, {"question_id": "state_x_9", "is_correct": True}]
    )
    client = client_for(coordinator)
    upload = SimpleUploadedFile("mc.json", content)
    response = client.post("/models/import/", {"release": release.pk, "name": "gpt-x", "file": upload}, follow=True)
    page = response.content.decode()
    assert "1 entries matched items of release v1; 1 name no item of it and were not stored (first: state_x_9)" in page
    compare = client.get("/models/compare/", {"release": release.pk}).content.decode()
    assert "gpt-x" in compare and "1 items every run answered" in compare
    bad = SimpleUploadedFile("mc.json", b"[1]")
    response = client.post("/models/import/", {"release": release.pk, "name": "m", "file": bad}, follow=True)
    assert "mc.json, entry 0: expected an object" in response.content.decode()


def test_the_run_page_links_the_release_it_ran_on(world, client_for, coordinator, server):
    evaluation = run_on_release(server, coordinator, world["release"])
    page = client_for(coordinator).get(f"/models/runs/{evaluation.pk}/").content.decode()
    number = world["release"].number
    assert f'release <a href="/releases/v{number}/"><strong>{world["release"].name}</strong></a>' in page


def planned_rows(model) -> float:
    """The rows the planner's statistics count in `model`'s table (pg_class.reltuples, which ANALYZE sets)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [model._meta.db_table])
        return cursor.fetchone()[0]


def test_a_run_and_an_import_leave_statistics_of_the_results_they_wrote(
    world, coordinator, server, django_capture_on_commit_callbacks
):
    """A bulk write of results is ANALYZEd once committed (subtlebench.planner): without it the planner takes a
    fresh run's results for a handful and the report's first view joins them with nested loops (75 s at 50,000
    items: bench/report_figures.py --no-analyze). The table's statistics then count exactly the rows there (a
    sample of all of them: the table is small)."""
    release, pairs, items = world["release"], world["pairs"], world["items"]
    assert planned_rows(ModelItemResult) != 3  # what the run below leaves
    with django_capture_on_commit_callbacks(execute=True):
        run_on_release(server, coordinator, release)
    assert planned_rows(ModelItemResult) == ModelItemResult.objects.count() == 3
    kept = items[pairs["kept"].pk]
    content = results_content([{"question_id": kept.item_id, "is_correct": True, "predicted_answer": "B"}])
    with django_capture_on_commit_callbacks(execute=True):
        model_results_import(user=coordinator, release=release, name="gpt-x", content=content, file_name="mc.json")
    assert planned_rows(ModelItemResult) == ModelItemResult.objects.count() == 4
