"""Models that draft, people who decide: our drafting prompt (a question, its answer and distractors for one pair and
category, asked as strict JSON), the parsing of a model's reply into a draft, and what a person changed of it.

Pure Python, like the rest of `benchmark/`: the app sends the prompt (annotator/drafting) and stores the draft and the
changes. The images go as in the multiple-choice protocol (`benchmark.protocol.image_part`): the annotator's frame A
first, frame B second, so "first image" in a draft means frame A.
"""

from __future__ import annotations

import difflib
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path

from benchmark import jsonlimits
from benchmark.protocol import MAX_OPTIONS, image_part
from benchmark.taxonomy import (
    BINARY_CATEGORIES,
    EXAMPLE_QUESTIONS,
    FIRST_IMAGE,
    SECOND_IMAGE,
    STANDARD_QUESTIONS,
    VIEWPOINT_MOVES,
)

MAX_DRAFT_DISTRACTORS = MAX_OPTIONS - 1  # evaluators parse A-E only: the answer and at most four distractors

# What differs, per category (BENCHMARK.md's table), for the prompt.
DIFFERENCES: dict[str, str] = {
    "attribute": "an attribute of an object (colour, size, texture)",
    "state": "the condition of an object (peeled, broken, open)",
    "emotion": "a facial expression",
    "temporal": "the time order of the two images",
    "spatial": "the position or arrangement of objects",
    "existence": "an object that appears or disappears",
    "quantity": "the number of objects",
    "quality": "the image quality (blur, noise, compression)",
    "viewpoint": "the camera's motion between the two shots",
    "action": "the pose or action of a person or animal",
}

DRAFT_SYSTEM = """You write multiple-choice questions about how two nearly identical images differ, for a benchmark \
of subtle image differences. A person checks and edits every question you write.

Reply with one JSON object and nothing else:
{"question": "...", "answer": "...", "distractors": ["...", "..."]}

Rules:
- The question asks about the one difference between the images that matters for the category.
- Unless the options say otherwise, describe the second image relative to the first.
- "answer" is the text of the correct option; "distractors" are wrong options, never the answer itself.
- At most 5 options in all: the answer and 1 to 4 distractors. Short options, no letters or numbering."""

DRAFT_USER = """Category: {category} (what differs: {difference}).
Example question: {example}
Options: {options}

Write the question, the answer and the distractors for these two images as the JSON object."""


def options_rule(category: str) -> str:
    """The options a category takes, in words, for the prompt."""
    if category in BINARY_CATEGORIES:
        return (
            f'exactly "{FIRST_IMAGE}" and "{SECOND_IMAGE}": the answer is one of them and the only distractor is the '
            "other."
        )
    if category == "viewpoint":
        return (
            "2 to 5 of: " + ", ".join(VIEWPOINT_MOVES) + " (how the camera moved from the first image to the second)."
        )
    if category == "existence":
        return "4 or 5 object names: the answer is the object that was added or removed."
    return "2 to 4 short texts, one of them right."


@dataclass(frozen=True)
class DraftPrompt:
    system: str
    user: str

    def as_dict(self) -> dict:
        return {"system": self.system, "user": self.user}

    def user_text(self, category: str) -> str:
        example = STANDARD_QUESTIONS.get(category) or EXAMPLE_QUESTIONS.get(category, "")
        values = {
            "{category}": category,
            "{difference}": DIFFERENCES.get(category, category),
            "{example}": example,
            "{options}": options_rule(category),
        }
        text = self.user
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        return text

    def messages(self, category: str, image_a: bytes, image_b: bytes) -> list[dict]:
        """The chat messages: the system text, then the two images (A first) and the category's user text."""
        text = self.user_text(category)
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": [image_part(image_a), image_part(image_b), {"type": "text", "text": text}]},
        ]


DEFAULT_DRAFT_PROMPT = DraftPrompt(system=DRAFT_SYSTEM, user=DRAFT_USER)


class DraftPromptError(ValueError):
    """A drafting prompt file that cannot be used; the message names the file and what is wrong."""


def load_draft_prompt(path: str) -> DraftPrompt:
    """The prompt of a JSON file {"system": ..., "user": ...} (either may be left out: ours then); the user template
    must hold {category}."""
    try:
        data = jsonlimits.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # ValueError: not UTF-8, not JSON, nested too deep, NaN
        raise DraftPromptError(f"{path}: cannot read it as JSON ({error}).") from error
    if not isinstance(data, dict):
        raise DraftPromptError(f"{path}: expected an object with system and user.")
    system, user = data.get("system", DRAFT_SYSTEM), data.get("user", DRAFT_USER)
    if not isinstance(system, str) or not isinstance(user, str):
        raise DraftPromptError(f"{path}: system and user must be text.")
    if "{category}" not in user:
        raise DraftPromptError(f"{path}: the user template lacks {{category}}.")
    return DraftPrompt(system=system, user=user)


# --- The reply ------------------------------------------------------------------------------------------------


class DraftReplyError(ValueError):
    """A model's reply that gives no usable draft; the message says what is wrong with it, quoting the start."""


@dataclass(frozen=True)
class Draft:
    question: str
    answer: str  # for a binary category: "first image" or "second image"
    distractors: list[str]
    answer_frame: str = ""  # binary categories: "a" (first image: frame A) or "b"


FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _shown(text: str) -> str:
    return " ".join(text.split())[:120]


def _json_object(text: str) -> dict:
    """The first JSON object of the reply: the whole reply, a ```json fence's content, or the text from the first {
    to its matching }."""
    candidates = [text.strip()]
    candidates += [match.group(1).strip() for match in FENCE.finditer(text)]
    start = text.find("{")
    if start >= 0:
        try:
            found, _ = jsonlimits.raw_decode(text[start:])
            candidates.append(found)
        except ValueError:
            pass
    for candidate in candidates:
        if isinstance(candidate, dict):
            return candidate
        try:
            parsed = jsonlimits.loads(candidate)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            return parsed
    raise DraftReplyError(f"the model's reply holds no JSON object: {_shown(text)!r}")


def _text(data: dict, name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise DraftReplyError(f'the model\'s JSON has no "{name}" text (got {json.dumps(value)[:80]})')
    return " ".join(value.split())


def binary_option(text: str) -> str | None:
    """ "first image" or "second image" for the ways a model says it ("The first image.", "image 1"), else None."""
    words = text.lower().strip().strip(string.punctuation + " ").removeprefix("the ").split()
    key = " ".join(words)
    if key in ("first image", "first", "image 1", "1st image", "image a", "left image"):
        return FIRST_IMAGE
    if key in ("second image", "second", "image 2", "2nd image", "image b", "right image"):
        return SECOND_IMAGE
    return None


def parse_draft(text: str | None, category: str) -> Draft:
    """The draft in a model's reply for this category; DraftReplyError says why the reply is unusable.

    Forgiving where the intent is plain: a ```json fence or words around the object, a lone distractor given as text,
    blank or repeated distractors and the answer repeated among them (dropped), more than four (the first four kept).
    Strict where it is not: no object, no question or answer, no distractor left, a binary answer that names no image.
    """
    if not text or not text.strip():
        raise DraftReplyError("the model's reply is empty")
    data = _json_object(text)
    question = _text(data, "question")
    answer = _text(data, "answer")
    raw = data.get("distractors", [])
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise DraftReplyError('the model\'s JSON has no "distractors" list of texts')
    if category in BINARY_CATEGORIES:
        option = binary_option(answer)
        if option is None:
            raise DraftReplyError(
                f'a {category} answer must be "{FIRST_IMAGE}" or "{SECOND_IMAGE}", not {answer[:60]!r}'
            )
        other = SECOND_IMAGE if option == FIRST_IMAGE else FIRST_IMAGE
        return Draft(question, option, [other], "a" if option == FIRST_IMAGE else "b")
    seen = {answer.casefold()}
    distractors = []
    for item in raw:
        item = " ".join(item.split())
        if item and item.casefold() not in seen:
            seen.add(item.casefold())
            distractors.append(item)
    if not distractors:
        raise DraftReplyError("the model's JSON has no distractor other than the answer")
    return Draft(question, answer, distractors[:MAX_DRAFT_DISTRACTORS])


# --- What the person changed ----------------------------------------------------------------------------------

UNCHANGED, EDITED, REPLACED = "unchanged", "edited", "replaced"
# Two texts at least this similar (difflib's ratio, case and spacing aside) are one text edited; below, replaced.
EDITED_RATIO = 0.5


def _norm(text: str) -> str:
    return " ".join((text or "").split()).casefold()


def text_change(drafted: str, submitted: str) -> str:
    a, b = _norm(drafted), _norm(submitted)
    if a == b:
        return UNCHANGED
    return EDITED if difflib.SequenceMatcher(None, a, b).ratio() >= EDITED_RATIO else REPLACED


def options_change(drafted: list[str], submitted: list[str]) -> str:
    """Unchanged: the same options (in any order: the evaluator shuffles them); edited: at least one drafted option
    kept or edited; replaced: none of them left."""
    a, b = sorted(map(_norm, drafted)), sorted(map(_norm, submitted))
    if a == b:
        return UNCHANGED
    kept = any(text_change(old, new) != REPLACED for old in a for new in b)
    return EDITED if kept else REPLACED


def draft_changes(
    *,
    category: str,
    drafted: dict,
    submitted: dict,
) -> dict:
    """What the person changed of the model's draft, per field: {"question": {"change": "edited", "drafted": ...,
    "submitted": ...}, "answer": ..., "distractors": ...}, and "category" when it differs. `drafted` and `submitted`
    hold category, question, answer, distractors and, for binary categories, answer_frame ("a" or "b"): there the
    answer compared is the frame, since the app decides the images' order after the draft."""
    changes: dict = {}
    if drafted.get("category") != category:
        changes["category"] = {"change": REPLACED, "drafted": drafted.get("category"), "submitted": category}
    changes["question"] = {
        "change": text_change(drafted.get("question", ""), submitted.get("question", "")),
        "drafted": drafted.get("question", ""),
        "submitted": submitted.get("question", ""),
    }
    if category in BINARY_CATEGORIES:
        old = f"frame {(drafted.get('answer_frame') or '?').upper()}"
        new = f"frame {(submitted.get('answer_frame') or '?').upper()}"
        changes["answer"] = {"change": UNCHANGED if old == new else REPLACED, "drafted": old, "submitted": new}
        changes["distractors"] = {"change": UNCHANGED, "drafted": [], "submitted": []}
        return changes
    changes["answer"] = {
        "change": text_change(drafted.get("answer", ""), submitted.get("answer", "")),
        "drafted": drafted.get("answer", ""),
        "submitted": submitted.get("answer", ""),
    }
    old_options = list(drafted.get("distractors") or [])
    new_options = list(submitted.get("distractors") or [])
    changes["distractors"] = {
        "change": options_change(old_options, new_options),
        "drafted": old_options,
        "submitted": new_options,
    }
    return changes


def taken_as_drafted(changes: dict) -> bool:
    """Whether the person submitted the draft without changing any field."""
    return bool(changes) and all(entry.get("change") == UNCHANGED for entry in changes.values())
