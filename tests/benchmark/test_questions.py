"""The question rules every entry point asks: at most five options, none that reads as a letter, none twice, none
overlong, no answer given away, the two images as a binary category's options; and any wording of the question."""

from __future__ import annotations

import pytest

from benchmark.protocol import LETTERS
from benchmark.questions import (
    MAX_DISTRACTORS,
    OPTION_MAX_CHARS,
    QUESTION_MAX_CHARS,
    option_key,
    question_problems,
)
from benchmark.taxonomy import BINARY_CATEGORIES, EXAMPLE_QUESTIONS, STANDARD_QUESTIONS


def problems(
    question="What changed about the cup?", answer="red", distractors=("blue",), category="attribute"
) -> list[str]:
    found = question_problems(question=question, answer=answer, distractors=list(distractors), category=category)
    return [str(p) for p in found]


def binary(question, answer="second image", distractors=("first image",), category="state") -> list[str]:
    return problems(question, answer, distractors, category)


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


# The generic questions rule templates write, the paper's own (the official adapter's example record uses the first).
GENERIC = {
    "state": "In which image is the apple peeled more?",
    "quality": "Which image has better quality?",
    "emotion": "In which image does the person look happier?",
    "quantity": "In which image are there more people?",
    "temporal": "Which image was taken later?",
}


@pytest.mark.parametrize("category, question", sorted(GENERIC.items()))
def test_a_generic_binary_question_is_a_valid_question_either_way_round(category, question):
    assert binary(question, category=category) == []
    assert binary(question, "first image", ["second image"], category=category) == []


def test_every_example_and_standard_question_is_valid_in_its_category_however_it_is_spelled():
    options = {"existence": ("a car", ["a tree", "a boat", "a house"]), "viewpoint": ("left", ["right"])}
    for category, question in {**EXAMPLE_QUESTIONS, **STANDARD_QUESTIONS}.items():
        answer, distractors = options.get(category, ("second image", ["first image"]))
        if category not in BINARY_CATEGORIES and category not in options:
            answer, distractors = "it turned red", ["it turned blue"]
        for spelled in (question, question.upper(), f"  {question.rstrip('?')}  "):
            assert problems(spelled, answer, distractors, category) == [], (category, spelled)
    assert problems("What was added in the second image?", "a car", ["a tree"], "existence") == []


def test_an_empty_or_overlong_text_is_refused():
    assert problems(question="  ") == ["the question is empty"]
    assert problems(question="Why? " * 101) == [f"the question is 505 characters (at most {QUESTION_MAX_CHARS})"]
    assert problems(question="W" * QUESTION_MAX_CHARS) == []
    assert problems(answer="") == ["the answer is empty"]
    long = "r" * (OPTION_MAX_CHARS + 1)
    assert problems(distractors=["blue", long]) == [f"distractor 2 is {OPTION_MAX_CHARS + 1} characters (at most 200)"]


def test_an_answer_the_question_names_alone_is_given_away():
    assert problems("Did the car turn red?", "red", ["blue", "green"]) == [
        "the question names the answer 'red' and no other option: it gives it away"
    ]
    assert binary("In which image is the apple peeled more, the SECOND image?") == [
        "the question names the answer 'second image' and no other option: it gives it away"
    ]
    assert problems("Where did the cup go (to the left)?", "To the left!", ["to the right"], "spatial") != []


def test_a_question_that_names_the_choice_or_only_part_of_a_word_gives_nothing_away():
    assert problems("Did the car turn red or blue?", "red", ["blue", "green"]) == []
    assert problems("Which image is sharper, the first image or the second image?", "second image",
                    ["first image"], "quality") == []  # fmt: skip
    assert problems("What was reduced?", "red", ["blue"]) == [], "whole words only"
    assert problems("How did the camera move from the first image to the second?", "left", ["right"], "viewpoint") == []


@pytest.mark.parametrize("category", sorted(BINARY_CATEGORIES))
def test_a_binary_category_has_the_two_images_as_its_options(category):
    assert binary("Which one?", "First Image", ["second image "], category=category) == []
    wrong = f"{category} questions have exactly the options 'first image' and 'second image'"
    assert binary("Which one?", "left image", ["right image"], category=category) == [wrong]
    assert binary("Which one?", "second image", ["the other one"], category=category) == [wrong]
    assert binary("Which one?", "second image", ["first image", "neither"], category=category) == [wrong]
    assert problems("Which one?", "second image", ["first image", "neither"], "attribute") == []
