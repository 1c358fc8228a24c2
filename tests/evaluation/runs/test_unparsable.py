"""Replies the official parser cannot read (issue 28): their own outcome, kept with the raw reply, scored wrong in the
headline accuracy as the official evaluator scores them, counted apart on the run page, the API and the results file;
an LLM extraction pass by a second endpoint gives the second figure, "accuracy with LLM extraction"."""

from __future__ import annotations

import pytest

from annotator.llm.endpoints import endpoint_create
from annotator.models import Job
from evaluation.models import ModelItemResult
from evaluation.runs.answering import parse_reply
from evaluation.runs.services import evaluation_run, evaluation_start
from tests.model_server import ModelServer
from tests.modeleval_fixtures import *  # noqa: F403 (fixtures: plan_release, server)
from tests.modeleval_fixtures import policy_for


def start(endpoint, coordinator, release, **fields):
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, **fields)
    return evaluation_run(evaluation_id=evaluation.pk)


def endpoint(server, coordinator, name="tiny"):
    return endpoint_create(
        user=coordinator, name=name, base_url=server.base_url, model_id="tiny-vlm", concurrency=2, timeout_s=5
    )


@pytest.mark.parametrize(
    "reply, outcome, letter",
    [
        ("### Reasoning\nA square.\n\n### Answer\nB", "parsed", "B"),
        ("The answer is (C).", "parsed", "C"),
        ("I cannot tell.", "unparsable", ""),
        ("", "unparsable", ""),
        ("### Answer\nE", "unparsable", "E"),  # a letter beyond the three options: kept, and wrong
    ],
)
def test_the_parse_outcome_is_the_official_parsers(reply, outcome, letter):
    assert parse_reply(reply, ["one", "two", "three"]) == (outcome, letter)


def test_an_unparsable_reply_is_a_wrong_answer_counted_apart_and_extraction_gives_a_second_figure(
    db, coordinator, server, plan_release, client_for
):
    release, records = plan_release
    right = next(r for r in records if r["_right"])  # the policy picks the answer: extraction reads it right
    wrong = next(r for r in records if not r["_right"])
    server.faults = {right["question"]: "malformed", wrong["question"]: "malformed"}
    extractor = ModelServer(policy=policy_for(records)).start()
    try:
        evaluation = start(
            endpoint(server, coordinator),
            coordinator,
            release,
            extraction_endpoint=endpoint(extractor, coordinator, name="reader"),
        )
    finally:
        extractor.stop()
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.errors
    correct_before = sum(r["_right"] for r in records) - 1  # the right item's reply could not be read
    assert (evaluation.answered, evaluation.failed, evaluation.unparsable) == (len(records), 0, 2)
    assert evaluation.correct == correct_before and evaluation.accuracy == correct_before / len(records)
    assert evaluation.extracted_correct == 1
    assert evaluation.accuracy_with_extraction == (correct_before + 1) / len(records)
    # The extractor got text only: the question, the options as shown and the raw reply.
    assert len(extractor.requests) == 2 and all(seen.images == [] for seen in extractor.requests)
    assert all("I cannot tell which option is right." in seen.text for seen in extractor.requests)
    assert {seen.body["temperature"] for seen in extractor.requests} == {0}
    rows = evaluation.results.filter(parse_outcome=ModelItemResult.Parse.UNPARSABLE).order_by("pk")
    assert [row.response_text for row in rows] == ["I cannot tell which option is right."] * 2
    assert {row.extraction for row in rows} == {"letter"} and all(row.is_correct is False for row in rows)

    client = client_for(coordinator)
    api = client.get(f"/api/models/runs/{evaluation.pk}/").json()
    assert api["unparsable"] == 2 and api["accuracy"] == evaluation.accuracy
    assert api["accuracy_with_extraction"] == evaluation.accuracy_with_extraction
    assert api["summary"]["extraction"]["read"] == 2 and api["summary"]["extraction"]["correct"] == 1
    data = client.get(f"/api/models/runs/{evaluation.pk}/results/").json()
    assert data["unparsable_count"] == 2 and data["accuracy"] == evaluation.accuracy
    assert data["llm_extraction"]["accuracy_with_llm_extraction"] == evaluation.accuracy_with_extraction
    unread = [entry for entry in data["questions"] if entry.get("parse_outcome") == "unparsable"]
    assert len(unread) == 2 and all(entry["predicted_answer"] is None for entry in unread)
    assert sorted(entry["extracted_answer"] == entry["correct_letter"] for entry in unread) == [False, True]
    page = client.get(f"/models/runs/{evaluation.pk}/").content.decode()
    assert 'id="run-unparsable"' in page and "accuracy with LLM extraction" in page
    assert page.count("I cannot tell which option is right.") == 2  # the raw replies, on the item list
    every = client.get(f"/models/runs/{evaluation.pk}/?items=all").content.decode()
    assert (
        every.count("The second image differs.") == len(records) - 2 and every.count("I cannot tell which option") == 2
    )


def test_without_extraction_there_is_no_second_figure(db, coordinator, server, plan_release):
    release, records = plan_release
    server.faults = {records[0]["question"]: "malformed"}
    evaluation = start(endpoint(server, coordinator), coordinator, release)
    assert evaluation.unparsable == 1 and evaluation.accuracy_with_extraction is None
    assert len(server.requests) == len(records)  # an unparsable reply is an answer: not asked again


def test_an_extraction_endpoint_that_is_down_leaves_its_rows_failed_and_the_run_ends(
    db, coordinator, server, plan_release, settings
):
    settings.MODEL_EVAL_BACKOFF_SECONDS, settings.MODEL_EVAL_BACKOFF_MAX_SECONDS = 0.01, 0.05
    release, records = plan_release
    server.faults = {records[0]["question"]: "malformed"}
    dead = ModelServer().start()
    reader = endpoint(dead, coordinator, name="reader")
    dead.stop()
    evaluation = start(endpoint(server, coordinator), coordinator, release, extraction_endpoint=reader)
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.errors
    row = evaluation.results.get(parse_outcome="unparsable")
    assert row.extraction == "failed" and "could not reach the endpoint" in row.extraction_text
    assert evaluation.accuracy_with_extraction == evaluation.accuracy
    assert job.result["extraction"]["failed"] == 1


@pytest.mark.parametrize(
    "reply, outcome, letter",
    [("B", "letter", "B"), ("The reply chose C.", "letter", "C"), ("X", "none", ""), ("D", "none", "")],
)
def test_the_extractors_reply_is_a_shown_letter_or_none(reply, outcome, letter):
    from evaluation.runs.extraction import read_letter

    assert read_letter(reply, ["one", "two", "three"]) == (outcome, letter)
