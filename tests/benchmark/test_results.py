"""The results file: written in the official layout, read back (ours, or any file with the official fields)."""

from __future__ import annotations

import json

import pytest

from benchmark.results import ResultsFileError, question_entry, read_results, results_document


def entries() -> list[dict]:
    answered = question_entry(
        question_id="spatial_yt8m_v_1_2", question_text="How did the cup move?", options=["left", "right", "up"],
        correct_letter="B", predicted_letter="B", is_correct=True, category="spatial", domain="natural",
        response="### Answer\nB",
    )  # fmt: skip
    failed = question_entry(
        question_id="state_yt8m_v_3_4", question_text="", options=["second image", "first image"],
        correct_letter="A", predicted_letter="", is_correct=False, category="state", domain="natural",
        error="timeout: no reply in 120 s",
    )  # fmt: skip
    return [answered, failed]


def test_an_entry_gives_the_options_as_shown_with_the_correct_and_predicted_texts():
    answered, failed = entries()
    assert answered["correct_answer"] == "right" and answered["negatives"] == ["left", "up"]
    assert answered["predicted_answer"] == "B" and answered["predicted_answer_text"] == "right"
    assert answered["response_content"] == "### Answer\nB" and "error" not in answered
    assert failed["predicted_answer"] is None and failed["predicted_answer_text"] is None
    assert failed["error"].startswith("timeout") and failed["cost"] == 0.0 and "response_content" not in failed


def document() -> dict:
    return results_document(
        model="m", temperature=0.5, questions=entries(), loaded=3, evaluation_time="2026-01-01T00:00:00+00:00",
        max_workers=8, skipped=["quality_yt8m_v_5_6"], seed=0, prompt_tokens=10, completion_tokens=2,
    )  # fmt: skip


def test_the_file_counts_the_run_and_lists_the_skipped_items():
    data = document()
    assert list(data)[:6] == [
        "model", "temperature", "repetition_penalty", "total_questions_loaded", "total_questions_evaluated",
        "evaluation_time",
    ]  # fmt: skip
    assert data["total_questions_evaluated"] == 2 and data["correct_count"] == 1
    # A failed request (the entry with `error`) is no answer: the accuracy is over the answered entry only.
    assert (data["answered_count"], data["failed_count"], data["not_asked_count"]) == (1, 1, 0)
    assert data["accuracy"] == 1.0
    assert data["skipped_items"] == [{"item_id": "quality_yt8m_v_5_6", "reason": "missing_image"}]


def test_a_written_file_reads_back_as_its_outcomes():
    outcomes = read_results(json.dumps(document()))
    assert [(o.question_id, o.is_correct, o.predicted) for o in outcomes] == [
        ("spatial_yt8m_v_1_2", True, "B"),
        ("state_yt8m_v_3_4", False, ""),
    ]


def test_it_reads_the_other_shapes_of_a_results_file_and_names_a_bad_entry():
    assert read_results('[{"question_id": 1, "is_correct": false}]')[0].question_id == "1"
    assert read_results('{"a_b_c": {"is_correct": true}}')[0].question_id == "a_b_c"
    with pytest.raises(ResultsFileError, match=r"run\.json, entry 0: is_correct must be true or false, got 'yes'"):
        read_results('{"results": [{"question_id": "x", "is_correct": "yes"}]}', "run.json")
    with pytest.raises(ResultsFileError, match="not valid JSON"):
        read_results("{", "run.json")
