"""A model run costs O(N): its totals move by each batch in the batch's transaction (a recount only on resume and
at the end), starting it counts its items in SQL, and its items are streamed a page at a time in the same order
and with the same shown options as the whole list shuffled at once."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotator.jobs.services import UnitRef, job_retry
from annotator.llm.endpoints import endpoint_create
from annotator.models import Job
from benchmark.protocol import shuffle_options
from evaluation.runs import results_files, services
from evaluation.runs.results_files import results_file, results_file_text
from evaluation.runs.services import evaluation_items, evaluation_run, evaluation_start, release_items
from evaluation.runs.summaries import evaluation_totals
from tests.modeleval_fixtures import *  # noqa: F403 (fixtures: plan_release, server)

TOTALS = list(services.TOTALS)


@pytest.fixture
def endpoint(server, coordinator):
    return endpoint_create(
        user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm", concurrency=2, timeout_s=5
    )


def test_it_streams_the_items_in_pages_with_the_options_of_the_whole_list_shuffled(
    db, coordinator, endpoint, plan_release, monkeypatch
):
    release, records = plan_release
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, seed=7, send=False)
    whole = release_items(release, "test")
    shuffle_options(whole, 7)
    monkeypatch.setattr(services, "ITEM_CHUNK", 3)  # 13 items: five pages, the last one short
    streamed = evaluation_items(evaluation)
    assert len(streamed) == len(records) == len(whole)
    assert [(i.question_id, i.options, i.correct_index) for i in streamed] == [
        (i.question_id, i.options, i.correct_index) for i in whole
    ]


def test_starting_a_run_counts_its_items_in_sql_without_reading_them(db, coordinator, endpoint, plan_release):
    release, records = plan_release
    with CaptureQueriesContext(connection) as queries:
        evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, send=False)
    assert evaluation.items == evaluation.job.total == len(records)
    releaseitem_reads = [q["sql"] for q in queries if 'FROM "annotator_releaseitem"' in q["sql"]]
    assert releaseitem_reads and all(sql.startswith("SELECT COUNT(*)") for sql in releaseitem_reads)


def test_each_batch_moves_the_totals_by_what_it_changed_without_recounting_the_run(
    db, coordinator, endpoint, server, plan_release, monkeypatch, settings
):
    release, records = plan_release
    settings.MODEL_EVAL_BACKOFF_SECONDS = 0.01
    settings.MODEL_EVAL_BACKOFF_MAX_SECONDS = 0.05
    settings.MODEL_EVAL_RETRIES = 0
    server.faults = {records[0]["question"]: "500", records[1]["question"]: "malformed"}
    monkeypatch.setattr(services, "FLUSH_ITEMS", 2)
    monkeypatch.setattr(services, "ITEM_CHUNK", 4)
    store, batches = services._store, []

    def checked_store(evaluation, results):
        with CaptureQueriesContext(connection) as queries:
            store(evaluation, results)
        # No query of the batch reads the run's other rows: no aggregate, no count.
        assert not [q["sql"] for q in queries if "COUNT(" in q["sql"] or "SUM(" in q["sql"]]
        evaluation.refresh_from_db()
        kept = {name: getattr(evaluation, name) for name in TOTALS}
        assert kept == {name: evaluation_totals(evaluation)[name] for name in TOTALS}
        batches.append(len(results))

    monkeypatch.setattr(services, "_store", checked_store)
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, send=False)
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    # The failed item was asked three times: its later failures replaced the earlier one in the totals.
    assert sum(batches) == len(records) + 2 and len(batches) > 2
    assert (evaluation.answered, evaluation.failed, evaluation.unparsable) == (len(records) - 1, 1, 1)
    assert evaluation.results.get(is_correct__isnull=True).asks == 3
    job = Job.objects.get(pk=evaluation.job_id)
    assert job.done == len(records) and job.status == Job.Status.FAILED
    # The streamed results file is the whole file's text, piece by piece (a failed entry and an unparsable one),
    # its entries read a chunk at a time with the questions of just that chunk's items.
    monkeypatch.setattr(results_files, "ENTRIES_CHUNK", 3)
    with CaptureQueriesContext(connection) as queries:
        pieces = list(results_file_text(evaluation))
    assert len(pieces) == len(records) + 2
    assert "".join(pieces) == json.dumps(results_file(evaluation), indent=2, ensure_ascii=False)
    questions = [q["sql"] for q in queries if 'FROM "annotator_releaseitem"' in q["sql"]]
    assert len(questions) == -(-len(records) // 3)  # one lookup per chunk of 3 entries, never the whole release's


def test_a_resumed_run_recounts_what_a_lost_batch_left_behind(db, coordinator, endpoint, plan_release):
    release, records = plan_release
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, send=False)
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    # Three results gone and the totals off; the retried job recounts them before it asks the three again.
    evaluation.results.filter(pk__in=evaluation.results.order_by("pk").values("pk")[:3]).delete()
    type(evaluation).objects.filter(pk=evaluation.pk).update(answered=99, correct=99, prompt_tokens=0)
    Job.objects.filter(pk=evaluation.job_id).update(status=Job.Status.FAILED)
    again = job_retry(job=evaluation.job, user=coordinator)
    unit = again.tasks.get()
    evaluation = evaluation_run(unit=UnitRef(unit.pk), **unit.kwargs)
    assert evaluation.answered == len(records) == evaluation.results.count()
    assert {name: getattr(evaluation, name) for name in TOTALS} == {
        name: evaluation_totals(evaluation)[name] for name in TOTALS
    }
