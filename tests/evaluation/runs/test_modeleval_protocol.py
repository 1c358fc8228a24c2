"""The request for an item follows the official evaluator's multiple-choice protocol (krafton-ai/VLM-SubtleBench),
and our answer parser behaves like its parser on the cases that parser handles."""

from __future__ import annotations

import base64
import random

import pytest

from annotator.llm.protocol import configured_prompt
from benchmark.protocol import (
    SYSTEM_PROMPT,
    Item,
    Prompt,
    lettered,
    messages_for,
    parse_answer,
    shuffle_options,
)


def items(n: int, missing: set[int] = frozenset()) -> list[Item]:
    return [
        Item(
            question_id=f"attribute_src_{i}",
            question=f"What changed about object {i}?",
            answer=f"answer {i}",
            distractors=[f"wrong {i}a", f"wrong {i}b", f"wrong {i}c"],
            category="attribute",
            domain="natural",
            image_1="a",
            image_2="b",
            missing=i in missing,
        )
        for i in range(n)
    ]


def official_shuffles(records: list[Item], seed: int, missing: set[int] = frozenset()) -> list[list[str]]:
    """What the official code does, step by step: `random.seed(random_seed)` once
    (multiple_choice_evaluator.py, `_load_and_sample_items`), then for each item in file order
    `UnifiedAdapter.process_item` builds `[answer] + distractors` and calls `random.shuffle` on the module's
    generator (dataset_adapters/unified_adapter.py) -- twice per item, because `_prepare_mc_task` calls
    `create_multiple_choice_prompt` (which processes the item and uses those options) and then `process_item` again
    for the question id; an item whose image is missing returns from `create_multiple_choice_prompt` after the
    first."""
    state = random.getstate()
    try:
        random.seed(seed)
        shown = []
        for index, item in enumerate(records):
            options = [item.answer, *item.distractors]
            random.shuffle(options)
            shown.append(options)
            if index not in missing:
                again = [item.answer, *item.distractors]
                random.shuffle(again)
        return shown
    finally:
        random.setstate(state)


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_it_shuffles_the_options_as_the_official_seeded_run_does(seed):
    batch = items(30, missing={4, 17})
    shuffle_options(batch, seed)
    expected = official_shuffles(batch, seed, missing={4, 17})
    assert [item.options for item in batch] == expected
    for item in batch:
        assert item.options[item.correct_index] == item.answer
        assert item.correct_letter == "ABCDE"[item.correct_index]
    # The shuffle does move answers around (a rule that always put the answer first would fail here).
    assert len({item.correct_index for item in batch}) > 1


def test_it_letters_options_a_to_e_one_per_line():
    """multiple_choice_evaluator.py, `create_multiple_choice_prompt`: "\\n".join(f"{chr(65+i)}. {option}")."""
    assert lettered(["left", "right", "up"]) == "A. left\nB. right\nC. up"


def test_the_message_is_system_then_two_images_in_order_then_the_question_and_options():
    """prompts/multiple_choice_evaluator.py: `_build_messages` (a system message, then one user message whose
    content is the image blocks and then one text block), `_create_two_image_messages` (first image, then
    second), `_image_block` (`data:image/jpeg;base64,` + the base64 of the file's bytes, utils.py
    `encode_image_to_base64`), `_get_user_prompt` ("Question: ..." and "Options:\\n" + the lettered options)."""
    item = items(1)[0]
    shuffle_options([item], 0)
    first, second = b"\xff\xd8first-image-bytes", b"\x89PNGsecond-image-bytes"
    messages = messages_for(item, first, second, configured_prompt())
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    parts = messages[1]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"]
    assert parts[0]["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(first).decode()
    assert parts[1]["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(second).decode()
    text = parts[2]["text"]
    assert f"Question: {item.question}\n" in text
    assert text.endswith("Options:\n" + lettered(item.options))
    assert "### Answer" in SYSTEM_PROMPT and "### Reasoning" in SYSTEM_PROMPT


def test_a_prompt_file_replaces_our_texts(tmp_path, settings):
    path = tmp_path / "prompt.json"
    path.write_text('{"system": "Be brief.", "user": "Q: {question}\\n{options}"}')
    settings.MODEL_EVAL_PROMPT_FILE = str(path)
    prompt = configured_prompt()
    assert prompt == Prompt(system="Be brief.", user="Q: {question}\n{options}")
    item = items(1)[0]
    shuffle_options([item], 0)
    messages = messages_for(item, b"a", b"b", prompt)
    assert messages[0]["content"] == "Be brief."
    assert messages[1]["content"][2]["text"] == f"Q: {item.question}\n{lettered(item.options)}"


# (reply, letter): the cases of dataset_adapters/response_parser.py `extract_multiple_choice_answer`, in its order.
PARSER_CASES = [
    (None, None),
    ("", None),
    ("### Reasoning\nThe mug is red now.\n\n### Answer\nC", "C"),
    ("### Answer B\nactually A", "B"),  # the heading wins over later letters
    ("### AnswerD", "D"),
    ("Reasoning here.\nB.\nThen\n(C)", "C"),  # the last line that is one letter, punctuation stripped
    ("I think the answer is B, not A.", "A"),  # no such line: the last word that is one letter
    ("answer: (D).", "D"),
    ("AB or BC?", ""),  # no stand-alone letter anywhere
    ("The answer is F.", ""),  # letters beyond E do not count
    ("a b c", ""),  # lower case does not count
    ("A-ish", "A"),  # last resort: a word-boundary match of a capital A-E
]


@pytest.mark.parametrize(("reply", "letter"), PARSER_CASES)
def test_it_parses_the_answer_letter_like_the_official_parser(reply, letter):
    assert parse_answer(reply) == letter


def test_an_empty_line_or_a_run_of_letters_is_not_an_answer():
    assert parse_answer("The change is subtle.\n\n") == ""
    assert parse_answer("CDE") == ""
