"""The drafting prompt and the parsing of a model's draft (benchmark/drafting.py): forgiving where the intent is plain,
a clear message where the reply is unusable; and what a person changed of a draft."""

from __future__ import annotations

import json

import pytest

from benchmark.drafting import (
    DEFAULT_DRAFT_PROMPT,
    DraftPromptError,
    DraftReplyError,
    draft_changes,
    load_draft_prompt,
    parse_draft,
    taken_as_drafted,
)


def test_it_reads_a_json_draft_inside_a_fence_and_prose():
    reply = 'Sure!\n```json\n{"question": "What changed about the mug?", "answer": "it turned red",\n'
    reply += '"distractors": ["it turned blue", "it got bigger"]}\n```\nHope this helps.'
    draft = parse_draft(reply, "attribute")
    assert (draft.question, draft.answer, draft.distractors) == (
        "What changed about the mug?",
        "it turned red",
        ["it turned blue", "it got bigger"],
    )


def test_it_drops_the_answer_blanks_and_repeats_among_the_distractors_and_keeps_four_at_most():
    reply = json.dumps(
        {
            "question": "What was added?",
            "answer": "a cat",
            "distractors": ["A cat", "", "a dog", "a dog ", "a bird", "a lamp", "a hat", "a cup"],
        }
    )
    draft = parse_draft(reply, "existence")
    assert draft.distractors == ["a dog", "a bird", "a lamp", "a hat"]
    assert "a cat" not in [d.lower() for d in draft.distractors]


def test_it_takes_a_lone_distractor_given_as_text():
    draft = parse_draft('{"question": "How did the cup move?", "answer": "left", "distractors": "right"}', "spatial")
    assert draft.distractors == ["right"]


@pytest.mark.parametrize(
    ("answer", "frame", "other"),
    [("Second image.", "b", "first image"), ("the first image", "a", "second image"), ("image 2", "b", "first image")],
)
def test_a_binary_answer_names_an_image_and_its_frame(answer, frame, other):
    draft = parse_draft(json.dumps({"question": "Which is sharper?", "answer": answer, "distractors": []}), "quality")
    assert draft.answer_frame == frame
    assert draft.distractors == [other]
    assert draft.answer in ("first image", "second image") and draft.answer != other


@pytest.mark.parametrize(
    ("reply", "category", "message"),
    [
        ("", "attribute", "the model's reply is empty"),
        ("I think the mug changed colour.", "attribute", "holds no JSON object: 'I think the mug changed colour.'"),
        ('["a", "b"]', "attribute", "holds no JSON object"),
        ('{"answer": "red", "distractors": ["blue"]}', "attribute", 'has no "question" text'),
        ('{"question": "Q?", "answer": "  ", "distractors": ["blue"]}', "attribute", 'has no "answer" text'),
        ('{"question": "Q?", "answer": "red", "distractors": [1, 2]}', "attribute", 'no "distractors" list of texts'),
        ('{"question": "Q?", "answer": "red", "distractors": ["Red", " "]}', "attribute", "no distractor other than"),
        ('{"question": "Q?", "answer": "the left one", "distractors": []}', "state", 'must be "first image" or'),
    ],
)
def test_an_unusable_reply_says_what_is_wrong(reply, category, message):
    with pytest.raises(DraftReplyError) as raised:
        parse_draft(reply, category)
    assert message in str(raised.value)


def test_the_prompt_names_the_category_its_options_and_the_json_shape():
    text = DEFAULT_DRAFT_PROMPT.user_text("viewpoint")
    assert text.startswith("Category: viewpoint")
    assert "rotate counterclockwise" in text and "{" not in text.replace("JSON object", "")
    binary = DEFAULT_DRAFT_PROMPT.user_text("temporal")
    assert '"first image" and "second image"' in binary and "Which image was taken later?" in binary
    messages = DEFAULT_DRAFT_PROMPT.messages("state", b"A", b"B")
    parts = messages[1]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"]
    assert parts[0]["image_url"]["url"].endswith("QQ==")  # base64 of b"A": frame A goes first
    assert '"distractors"' in messages[0]["content"]


def test_a_prompt_file_replaces_the_texts_and_a_bad_one_is_named(tmp_path):
    good = tmp_path / "draft.json"
    good.write_text(json.dumps({"user": "Draft a {category} question as JSON."}))
    prompt = load_draft_prompt(str(good))
    assert prompt.user_text("action") == "Draft a action question as JSON."
    assert prompt.system == DEFAULT_DRAFT_PROMPT.system
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"user": "no placeholder"}))
    with pytest.raises(DraftPromptError, match=r"bad\.json: the user template lacks \{category\}"):
        load_draft_prompt(str(bad))


def test_changes_say_unchanged_edited_or_replaced_per_field():
    drafted = {
        "category": "attribute",
        "question": "What changed about the mug?",
        "answer": "it turned red",
        "distractors": ["it turned blue", "it got bigger"],
    }
    same = draft_changes(
        category="attribute", drafted=drafted, submitted={**drafted, "distractors": ["it got bigger", "it turned blue"]}
    )
    assert {name: entry["change"] for name, entry in same.items()} == {
        "question": "unchanged",
        "answer": "unchanged",
        "distractors": "unchanged",  # the evaluator shuffles the options: their order is no change
    }
    assert taken_as_drafted(same)
    submitted = {
        "question": "What changed about the red mug?",
        "answer": "a cat walked in",
        "distractors": ["it turned blue", "it got smaller"],
    }
    changes = draft_changes(category="attribute", drafted=drafted, submitted=submitted)
    assert {name: entry["change"] for name, entry in changes.items()} == {
        "question": "edited",
        "answer": "replaced",
        "distractors": "edited",
    }
    assert changes["question"] == {
        "change": "edited",
        "drafted": "What changed about the mug?",
        "submitted": "What changed about the red mug?",
    }
    assert not taken_as_drafted(changes)
    other = draft_changes(category="attribute", drafted=drafted, submitted={**submitted, "distractors": ["zzz", "qqq"]})
    assert other["distractors"]["change"] == "replaced"


def test_a_binary_answer_is_compared_as_the_frame_and_a_new_category_is_recorded():
    drafted = {"category": "state", "question": "Which is open?", "answer": "first image", "answer_frame": "a"}
    flipped = draft_changes(
        category="state", drafted=drafted, submitted={"question": "Which is open?", "answer_frame": "b"}
    )
    assert flipped["answer"] == {"change": "replaced", "drafted": "frame A", "submitted": "frame B"}
    assert flipped["question"]["change"] == "unchanged" and "category" not in flipped
    moved = draft_changes(
        category="quality", drafted=drafted, submitted={"question": "Which is open?", "answer_frame": "a"}
    )
    assert moved["category"] == {"change": "replaced", "drafted": "state", "submitted": "quality"}
