"""Question templates per category (BENCHMARK.md's table), the authoring rules on top of the format's question
rules, and answer-position balancing."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from django.db.models import Count

from annotator.models import Category, Pair
from benchmark.questions import Problem, option_clean, option_key, question_problems
from benchmark.taxonomy import (
    BINARY_CATEGORIES,
    EXAMPLE_QUESTIONS,
    STANDARD_QUESTIONS,
    VIEWPOINT_MOVES,
)
from benchmark.taxonomy import FIRST_IMAGE as FIRST
from benchmark.taxonomy import SECOND_IMAGE as SECOND
from subtlebench.errors import Invalid
from subtlebench.text import OPTIONS_MAX, QUESTION_MAX, SHORT_TEXT_MAX


@dataclass(frozen=True)
class Template:
    question: str
    answer: str = ""
    distractors: tuple[str, ...] = ("",)
    # "first image" / "second image" categories: the annotator says which frame (A or B) is the answer and
    # the app decides the order of the images; the options themselves are fixed.
    binary: bool = False
    hint: str = ""
    choices: tuple[str, ...] = field(default=())


TEMPLATES: dict[str, Template] = {
    Category.ATTRIBUTE: Template(
        EXAMPLE_QUESTIONS[Category.ATTRIBUTE], "", ("", ""), hint="2-4 attribute texts: the second image vs the first."
    ),
    Category.STATE: Template(EXAMPLE_QUESTIONS[Category.STATE]),
    Category.EMOTION: Template(EXAMPLE_QUESTIONS[Category.EMOTION]),
    Category.TEMPORAL: Template(STANDARD_QUESTIONS[Category.TEMPORAL], hint="The answer follows from the timestamps."),
    Category.SPATIAL: Template(EXAMPLE_QUESTIONS[Category.SPATIAL], "", ("", ""), hint="2-3 direction texts."),
    Category.EXISTENCE: Template(EXAMPLE_QUESTIONS[Category.EXISTENCE], "", ("", "", ""), hint="4-5 object texts."),
    Category.QUANTITY: Template(EXAMPLE_QUESTIONS[Category.QUANTITY]),
    Category.QUALITY: Template(EXAMPLE_QUESTIONS[Category.QUALITY]),
    Category.VIEWPOINT: Template(
        STANDARD_QUESTIONS[Category.VIEWPOINT],
        "",
        ("",),
        hint="2-5 of: " + ", ".join(VIEWPOINT_MOVES) + ".",
        choices=VIEWPOINT_MOVES,
    ),
    Category.ACTION: Template(EXAMPLE_QUESTIONS[Category.ACTION], "", ("", ""), hint="2-4 actions."),
}

# The binary categories are the benchmark's (`benchmark.taxonomy`): the templates do not restate them.
TEMPLATES = {category: replace(t, binary=category in BINARY_CATEGORIES) for category, t in TEMPLATES.items()}

# Keys 1-9 and 0 pick the categories in the paper's order.
CATEGORY_KEYS = {str((number + 1) % 10): category.value for number, category in enumerate(Category)}


def template_table() -> dict[str, dict]:
    """The templates as plain data for the workbench's JSON blob."""
    return {
        category: {
            "question": t.question,
            # An example is the question box's placeholder, never its value (it may name an object the pair lacks,
            # though sent as it is it is a valid question); a standard question (temporal, viewpoint) is filled in.
            "example": t.question in EXAMPLE_QUESTIONS.values(),
            "answer": t.answer,
            "distractors": list(t.distractors),
            "binary": t.binary,
            "hint": t.hint,
            "choices": list(t.choices),
            "derived": category == Category.TEMPORAL,
        }
        for category, t in TEMPLATES.items()
    }


def question_validate(*, category: str, question: str, answer: str, distractors: list) -> tuple[str, str, list]:
    """Check one question against the benchmark's format rules and the editor's authoring rules on top of them;
    return it cleaned (see `option_clean`) or raise Invalid.

    The format rules are `benchmark.questions.question_problems`, the ones `import_pairs`, the export and
    `validate_benchmark` apply, checked on the text as sent: what the editor accepts, they accept. The errors
    are keyed by field so a form can show each beside its input.
    """
    if category not in Category.values:
        raise Invalid({"category": [f"Unknown category {category!r}: pick one of {', '.join(Category)}."]})
    if not isinstance(distractors, list | tuple):
        raise Invalid({"distractors": ["Distractors must be a list of texts."]})
    # A blank form field arrives as None. An empty distractor slot (the editor and its templates offer a few) is
    # one the author did not use: left out, not refused. The format itself has no empty option
    # (`question_problems`, which import and export apply).
    question, answer = ("" if text is None else text for text in (question, answer))
    distractors = [text for text in distractors if not (text is None or isinstance(text, str) and not text.strip())]
    _refuse_oversized(question, answer, distractors)
    problems = question_problems(question=question, answer=answer, distractors=distractors, category=category)
    if not problems:
        question, answer = option_clean(question), option_clean(answer)
        distractors = [option_clean(text) for text in distractors]
        problems = authoring_problems(category, answer, distractors)
    if problems:
        errors: dict[str, list[str]] = {}
        for problem in problems:
            errors.setdefault(problem.field, []).append(sentence(problem.message))
        raise Invalid(errors)
    if TEMPLATES[category].binary:
        answer = option_key(answer)
        distractors = [option_key(text) for text in distractors]
    return question, answer, distractors


def _refuse_oversized(question: str, answer: str, distractors: list) -> None:
    """The length limits of the model fields, checked before anything else reads the texts. Line breaks and
    invisible characters are the format's rules (`question_problems`), so every entry point words them alike."""
    errors: dict[str, list[str]] = {}
    for name, value, limit in (("question", question, QUESTION_MAX), ("answer", answer, SHORT_TEXT_MAX)):
        if len(value) > limit:
            errors[name] = [f"{len(value)} characters; at most {limit}."]
    if len(distractors) > OPTIONS_MAX:
        errors["distractors"] = [f"{len(distractors)} options; at most {OPTIONS_MAX}."]
    elif any(isinstance(text, str) and len(text) > SHORT_TEXT_MAX for text in distractors):
        errors["distractors"] = [f"An option is longer than {SHORT_TEXT_MAX} characters."]
    if errors:
        raise Invalid(errors)


def authoring_problems(category: str, answer: str, distractors: list[str]) -> list[Problem]:
    """The editor's rules on top of the format: camera moves for viewpoint."""
    template = TEMPLATES[category]
    problems = []
    if template.choices:
        allowed = {option_key(choice) for choice in template.choices}
        for field_name, text in [("answer", answer), *(("distractors", text) for text in distractors)]:
            if option_key(text) not in allowed:
                problems.append(
                    Problem(field_name, f"{text!r} is not a camera move; use {', '.join(template.choices)}")
                )
    return problems


def sentence(message: str) -> str:
    """A format problem ("the answer is empty") as a form shows it ("The answer is empty.")."""
    return f"{message[:1].upper()}{message[1:]}."


def answer_position_next(category: str) -> str:
    """FIRST or SECOND: where the correct answer of the next binary pair in this category should sit.

    Counts the category's live pairs in the benchmark (not rejected or withdrawn, no experiment's) and picks the
    rarer position, so the benchmark cannot be answered by always guessing one side.
    """
    counts = dict.fromkeys((FIRST, SECOND), 0)
    rows = (
        Pair.objects.outside_experiments()
        .filter(category=category, answer__in=(FIRST, SECOND))
        .exclude(status__in=(Pair.Status.REJECTED, Pair.Status.WITHDRAWN))
        .values_list("answer")
        .order_by()
        .annotate(n=Count("id"))
    )
    for answer, n in rows:
        counts[answer] = n
    return FIRST if counts[FIRST] <= counts[SECOND] else SECOND
