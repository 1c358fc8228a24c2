"""The taxonomy: ten categories in the paper's order, their abbreviations, the binary ones, and the app's choices
made from the same lists."""

from __future__ import annotations

from benchmark.taxonomy import (
    ABBREVIATIONS,
    BINARY_CATEGORIES,
    BINARY_OPTIONS,
    CATEGORIES,
    DOMAINS,
    EXAMPLE_QUESTIONS,
    STANDARD_QUESTIONS,
)


def test_the_categories_are_the_papers_ten_with_its_abbreviations_in_its_order():
    assert CATEGORIES[:4] == ("attribute", "state", "emotion", "temporal") and len(set(CATEGORIES)) == 10
    assert list(ABBREVIATIONS) == list(CATEGORIES)
    assert " ".join(ABBREVIATIONS.values()) == "AT ST EM TM SP EX QN QL VP AC"


def test_the_binary_categories_answer_with_the_two_images():
    assert BINARY_CATEGORIES == {"state", "emotion", "temporal", "quantity", "quality"} < set(CATEGORIES)
    assert BINARY_OPTIONS == ("first image", "second image")


def test_every_category_has_one_example_or_one_standard_question():
    assert sorted([*EXAMPLE_QUESTIONS, *STANDARD_QUESTIONS]) == sorted(CATEGORIES)
    assert set(STANDARD_QUESTIONS) == {"temporal", "viewpoint"}


def test_the_apps_choices_are_made_from_these_lists():
    from annotator.models import CATEGORY_ABBREVIATIONS, Category, Domain

    assert Category.values == list(CATEGORIES) and Domain.values == list(DOMAINS)
    assert Category.TEMPORAL == "temporal" and Category.TEMPORAL.label == "Temporal"
    assert CATEGORY_ABBREVIATIONS[Category.VIEWPOINT] == "VP"
