"""The question rules of the format: what makes a multiple-choice question (question, answer, distractors) one the
official evaluator can ask. The editor (with its authoring rules on top), `import_pairs`, the export and
`validate_benchmark` all ask `question_problems`, so the same question gets the same verdict from each.

The rules guard what a model could exploit or an evaluator misread: empty or overlong texts, options that repeat
or read as a letter, an answer the question gives away, a binary category whose options are not the two images.
How a question is worded is not a rule: the generic questions rule templates write ("Which image has better
quality?") are the paper's own kind, and many items share one; whether an item is good is whether its options and
answer fit its pair, which a reviewer judges."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from benchmark.protocol import MAX_OPTIONS, reads_as_letter
from benchmark.taxonomy import BINARY_CATEGORIES, BINARY_OPTIONS

MAX_DISTRACTORS = MAX_OPTIONS - 1  # evaluators parse the letters A-E only: the answer plus at most 4 distractors
# Lengths in characters: a question is one sentence and an option a few words; the database's fields and the
# editor's inputs hold these limits too (subtlebench.text).
QUESTION_MAX_CHARS = 500
OPTION_MAX_CHARS = 200

# Line breaks would split an option over lines of the lettered list; invisible characters (zero-width space, bidi
# controls) would make two options that look the same differ.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


@dataclass(frozen=True)
class Problem:
    """One broken rule: `field` ("question", "answer", "distractors", or another field of a record) is where a form
    shows it and what an import report names."""

    field: str
    message: str

    def __str__(self):
        return self.message


def option_key(text: str) -> str:
    """The form in which two options count as the same option.

    NFKC folds compatibility variants (full-width letters, ligatures, a no-break space) and the canonical
    ones NFC folds (a precomposed é and e + combining accent); casefold ignores case; runs of white space
    count as one space and the ends do not count. A model reads "First image" and "first image " as one
    option, so they may not be two options of one question, nor the answer and a distractor.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


def option_clean(text: str) -> str:
    """An option (or question) as the editor stores it: NFC, ends trimmed, runs of white space as one space."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def option_text_problem(text: str) -> str | None:
    """Why a non-empty option text cannot go to the evaluator, or None."""
    hidden = next((c for c in text if unicodedata.category(c) in INVISIBLE_CATEGORIES), None)
    if hidden is not None:
        return f"contains a line break, tab or invisible character (U+{ord(hidden):04X})"
    if reads_as_letter(text):
        return "reads as an answer letter (A-E): the evaluator would take a reply quoting it for that letter"
    return None


def words_of(text: str) -> list[str]:
    """A text as plain words: `option_key` (case, width, white space) with the punctuation dropped, so the question
    "Did it turn red, or not?" holds the words of the option "Red!"."""
    return "".join(" " if unicodedata.category(c).startswith("P") else c for c in option_key(text)).split()


def question_problems(*, question, answer, distractors, category: str) -> list[Problem]:
    """Every way a multiple-choice question of this category breaks the benchmark format (empty when it is fine)."""
    problems: list[Problem] = []
    if not isinstance(question, str):
        problems.append(Problem("question", "the question is not a string"))
    elif not question.strip():
        problems.append(Problem("question", "the question is empty"))
    elif len(question) > QUESTION_MAX_CHARS:
        problems.append(
            Problem("question", f"the question is {len(question)} characters (at most {QUESTION_MAX_CHARS})")
        )
    answer_problem = option_problem("the answer", answer)
    if answer_problem:
        problems.append(Problem("answer", answer_problem))
    if not isinstance(distractors, list):
        return [*problems, Problem("distractors", "the distractors must be a list of texts")]
    if not distractors:
        problems.append(Problem("distractors", f"give 1 to {MAX_DISTRACTORS} distractors: there are none"))
    if len(distractors) > MAX_DISTRACTORS:
        problems.append(Problem("distractors", f"{len(distractors)} distractors (at most {MAX_DISTRACTORS})"))
    usable = []  # the distractors whose text can be compared
    for number, text in enumerate(distractors, 1):
        problem = option_problem(f"distractor {number}", text)
        if problem:
            problems.append(Problem("distractors", problem))
        else:
            usable.append(text)
    answer_key = None if answer_problem else option_key(answer)
    like_answer = [text for text in usable if option_key(text) == answer_key]
    if like_answer:
        spelled = "" if like_answer[0] == answer else f" (as {like_answer[0]!r})"
        problems.append(Problem("answer", f"the answer {answer!r} is among the distractors{spelled}"))
    spellings: dict[str, list[str]] = {}
    for text in usable:
        if option_key(text) != answer_key:
            spellings.setdefault(option_key(text), []).append(text)
    repeated = [list(dict.fromkeys(group)) for group in spellings.values() if len(group) > 1]
    if repeated:
        listed = ", ".join(" = ".join(map(repr, group)) for group in repeated)
        problems.append(Problem("distractors", f"duplicate options: {listed}"))
    if problems:
        return problems
    return binary_option_problems(category, answer, distractors) or give_away_problems(question, answer, distractors)


def binary_option_problems(category: str, answer: str, distractors: list[str]) -> list[Problem]:
    """A binary category asks which image: its options are the two images by their place, "first image" and
    "second image" (the app trades the images to balance the answers, which only such options survive)."""
    if category not in BINARY_CATEGORIES:
        return []
    if sorted(option_key(text) for text in [answer, *distractors]) == sorted(BINARY_OPTIONS):
        return []
    first, second = BINARY_OPTIONS
    field = "distractors" if option_key(answer) in BINARY_OPTIONS else "answer"
    return [Problem(field, f"{category} questions have exactly the options {first!r} and {second!r}")]


def give_away_problems(question: str, answer: str, distractors: list[str]) -> list[Problem]:
    """The question names the answer and no other option ("Did the car turn red?" with red, blue, green): it is
    answered without looking at the images. A question that names several options ("Is it red or blue?") names
    the choice, not the answer."""
    words = words_of(question)
    if not says(words, answer) or any(says(words, text) for text in distractors):
        return []
    return [Problem("question", f"the question names the answer {answer!r} and no other option: it gives it away")]


def says(words: list[str], option: str) -> bool:
    """Whether the option's words stand in `words` one after another (as whole words, punctuation aside)."""
    wanted = words_of(option)
    return bool(wanted) and any(words[i : i + len(wanted)] == wanted for i in range(len(words) - len(wanted) + 1))


def option_problem(label: str, text) -> str | None:
    """What is wrong with one option on its own ("the answer", "distractor 2"), or None."""
    if not isinstance(text, str):
        return f"{label} is not a string"
    if not text.strip():
        return f"{label} is empty"
    if len(text) > OPTION_MAX_CHARS:
        return f"{label} is {len(text)} characters (at most {OPTION_MAX_CHARS})"
    problem = option_text_problem(text)
    return f"{label} {text!r} {problem}" if problem else None
