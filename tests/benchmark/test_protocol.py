"""The letters and the prompt file of the multiple-choice protocol (the shuffle, the messages and the parser are
pinned against the official evaluator in tests/test_modeleval_protocol.py)."""

from __future__ import annotations

import json

import pytest

from benchmark.protocol import (
    DEFAULT_PROMPT,
    LETTERS,
    PromptFileError,
    letter,
    letter_index,
    lettered,
    load_prompt,
    option_of,
    parse_answer,
    reads_as_letter,
)


def test_the_options_are_lettered_a_to_e_and_a_letter_names_only_an_option_shown():
    assert LETTERS == "ABCDE" and letter(4) == "E" and letter_index("C") == 2
    assert lettered(["left", "right"]) == "A. left\nB. right"
    assert option_of(["left", "right"], "B") == "right"
    assert option_of(["left", "right"], "C") is None and option_of(["left"], "F") is None


def test_a_reply_is_read_for_a_letter_the_options_cannot_be_mistaken_for():
    assert parse_answer("### Reasoning\nThe mug moved.\n### Answer\nB") == "B"
    assert parse_answer("no idea") == "" and parse_answer("") is None
    assert (
        reads_as_letter(" D. ")
        and not reads_as_letter("d.")
        and reads_as_letter("A) the left one")
        and not reads_as_letter("Apple")
    )


def test_a_prompt_file_replaces_our_texts_and_a_bad_one_is_named(tmp_path):
    good = tmp_path / "prompt.json"
    good.write_text(json.dumps({"user": "Q: {question}\n{options}"}))
    prompt = load_prompt(str(good))
    assert prompt.system == DEFAULT_PROMPT.system and prompt.user == "Q: {question}\n{options}"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"user": "no placeholders"}))
    with pytest.raises(PromptFileError, match=r"bad\.json: the user template lacks \{question\}"):
        load_prompt(str(bad))
