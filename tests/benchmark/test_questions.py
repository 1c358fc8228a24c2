"""The question rules every entry point asks: at most five options, none that reads as a letter, none twice."""

from __future__ import annotations

from benchmark.protocol import LETTERS
from benchmark.questions import MAX_DISTRACTORS, option_key, question_problems


def problems(question="What changed about the cup?", answer="red", distractors=("blue",)) -> list[str]:
    return [str(p) for p in question_problems(question=question, answer=answer, distractors=list(distractors))]


def test_a_question_has_at_most_as_many_options_as_the_evaluator_has_letters():
    assert MAX_DISTRACTORS + 1 == len(LETTERS) == 5
    assert problems(distractors=["a1", "b1", "c1", "d1"]) == []
    assert problems(distractors=["a1", "b1", "c1", "d1", "e1"]) == ["5 distractors (at most 4)"]


def test_it_refuses_an_option_that_reads_as_an_answer_letter():
    assert any("reads as an answer letter" in p for p in problems(distractors=["B"]))
    assert any("reads as an answer letter" in p for p in problems(answer="(C) the red one"))
    assert problems(answer="Bread") == []


def test_two_options_that_differ_only_in_case_width_or_spaces_are_one_option():
    assert option_key("ＦＩＲＳＴ  Image ") == "first image"
    assert problems(distractors=["blue", " BLUE"]) == ["duplicate options: 'blue' = ' BLUE'"]


def test_the_example_question_is_refused_and_the_standard_one_is_not():
    assert problems(question="what changed about the mug") == [
        "the question 'what changed about the mug' is the attribute example: write what differs in these two images"
    ]
    assert problems(question="Which image was taken later?", answer="second image", distractors=["first image"]) == []
