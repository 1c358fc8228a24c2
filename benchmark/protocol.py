"""The official evaluator's multiple-choice protocol (krafton-ai/VLM-SubtleBench), as facts carried over:

- the options are `[answer] + distractors`, shuffled in place by one `random` generator seeded once with the run's
  seed and stepped through the items in file order; the official adapter processes each item twice (the prompt,
  then the question id), so each item consumes two shuffles, of which the first is the one shown; an item whose
  image file is missing is skipped after the first;
- the options are lettered "A. text" one per line (letters A to E);
- one system message, then one user message whose content is the two images as `image_url` parts (the raw file
  bytes in base64, in a `data:image/jpeg;base64,` URL whatever the file's type), first image then second, followed
  by one text part with the question and the lettered options;
- the answer letter is parsed as its ResponseParser does (see `parse_answer`).

The prompt texts are ours (a prompt file replaces them: `load_prompt`), in the same format.
"""

from __future__ import annotations

import base64
import random
import re
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from benchmark import jsonlimits

LETTERS = "ABCDE"
VALID_LETTERS = frozenset(LETTERS)
MAX_OPTIONS = len(LETTERS)  # the answer and at most four distractors: evaluators parse A-E only

SYSTEM_PROMPT = """You answer multiple-choice questions about how two nearly identical images differ.
Look closely at both images and find the one difference that matters for the question.

Guidelines:
- Unless an option says otherwise, a difference describes the second image relative to the first.
- Reply **only** in this format, with one letter as the answer.

### Reasoning
[what differs between the two images, briefly]

### Answer
[one letter]"""

USER_TEMPLATE = """Question: {question}

Look at both images and pick the option that best describes the key difference.

Options:
{options}"""


def letter(index: int) -> str:
    """The letter of the option at this place (0 -> "A")."""
    return LETTERS[index]


def letter_index(letter_: str) -> int:
    """The place of the option with this letter ("A" -> 0)."""
    return LETTERS.index(letter_)


def option_of(options: list[str], letter_: str) -> str | None:
    """The text of the option with this letter, or None when the letter names no option shown."""
    if letter_ not in VALID_LETTERS or letter_index(letter_) >= len(options):
        return None
    return options[letter_index(letter_)]


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str

    def as_dict(self) -> dict:
        return {"system": self.system, "user": self.user}


DEFAULT_PROMPT = Prompt(system=SYSTEM_PROMPT, user=USER_TEMPLATE)


class PromptFileError(ValueError):
    """A prompt file that cannot be used; the message names the file and what is wrong."""


@cache
def load_prompt(path: str) -> Prompt:
    """The prompt of a JSON file {"system": ..., "user": ...} (either may be left out: ours then); the user
    template must hold {question} and {options}."""
    try:
        data = jsonlimits.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # ValueError: not UTF-8, not JSON, nested too deep, NaN
        raise PromptFileError(f"{path}: cannot read it as JSON ({error}).") from error
    if not isinstance(data, dict):
        raise PromptFileError(f"{path}: expected an object with system and user.")
    system, user = data.get("system", SYSTEM_PROMPT), data.get("user", USER_TEMPLATE)
    if not isinstance(system, str) or not isinstance(user, str):
        raise PromptFileError(f"{path}: system and user must be text.")
    for placeholder in ("{question}", "{options}"):
        if placeholder not in user:
            raise PromptFileError(f"{path}: the user template lacks {placeholder}.")
    return Prompt(system=system, user=user)


@dataclass
class Item:
    """One multiple-choice item as the official adapter reads a record."""

    question_id: str
    question: str
    answer: str
    distractors: list[str]
    category: str
    domain: str
    image_1: str  # a file path, or a name the caller knows how to read
    image_2: str
    pair_id: int | None = None  # the caller's key for the item, if it has one
    missing: bool = False  # an image file is missing: skipped, as the official evaluator skips it
    options: list[str] = field(default_factory=list)
    correct_index: int = -1

    @property
    def correct_letter(self) -> str:
        return letter(self.correct_index)


def shuffle_options(items: list[Item], seed: int) -> None:
    """Give each item its shown options and correct index, as the official evaluator's seeded run does."""
    for _ in shuffled(items, seed):
        pass


def shuffled(items: Iterable[Item], seed: int) -> Iterator[Item]:
    """`shuffle_options` one item at a time, for a caller that streams its items: each item is yielded with its shown
    options as soon as it has them (one seeded generator over all items, in their order)."""
    rng = random.Random(seed)
    for item in items:
        options = [item.answer, *item.distractors]
        rng.shuffle(options)
        item.options = options
        item.correct_index = options.index(item.answer)
        if not item.missing:
            rng.shuffle([item.answer, *item.distractors])  # the adapter's second pass over the item
        yield item


def lettered(options: list[str]) -> str:
    return "\n".join(f"{letter(index)}. {option}" for index, option in enumerate(options))


def image_part(data: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(data).decode()}}


def messages_for(item: Item, image_1: bytes, image_2: bytes, prompt: Prompt) -> list[dict]:
    user = prompt.user.replace("{question}", item.question).replace("{options}", lettered(item.options))
    return [
        {"role": "system", "content": prompt.system},
        {"role": "user", "content": [image_part(image_1), image_part(image_2), {"type": "text", "text": user}]},
    ]


ANSWER_HEADING = re.compile(rf"### Answer\s*([{LETTERS}])")
LONE_LETTER = re.compile(rf"\b[{LETTERS}]\b")


def parse_answer(text: str | None) -> str | None:
    """The answer letter: after "### Answer"; else the last line that is one letter (punctuation stripped); else
    the last word that is one letter; else the first stand-alone capital A-E. "" when none; None for no text."""
    if not text:
        return None
    text = text.strip()
    heading = ANSWER_HEADING.search(text)
    if heading:
        return heading.group(1)
    for pieces in (text.split("\n"), text.split()):
        found = [piece.strip(string.punctuation) for piece in pieces]
        found = [piece for piece in found if piece in VALID_LETTERS]
        if found:
            return found[-1]
    lone = LONE_LETTER.search(text)
    return lone.group() if lone else ""


# An option that is such a letter, or starts with such a label ("B.", "(C)"), makes a reply that quotes it read as
# another option's letter: the question rules refuse it.
LETTER_LABEL = re.compile(rf"\(?[{LETTERS[0]}-{LETTERS[-1]}][.):](\s|$)")


def reads_as_letter(text: str) -> bool:
    stripped = text.strip()
    return stripped.strip(string.punctuation + " ") in VALID_LETTERS or bool(LETTER_LABEL.match(stripped))
