"""Question templates per category (BENCHMARK.md's table), the validation rules, and answer-position balancing."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count

from annotator.models import Category, Pair
from subtlebench.errors import Invalid

FIRST = "first image"
SECOND = "second image"
MAX_OPTIONS = 5  # evaluators parse letters A-E only
VIEWPOINT_MOVES = (
    "left",
    "right",
    "up",
    "down",
    "forward",
    "backward",
    "rotate clockwise",
    "rotate counterclockwise",
)


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
        "What changed about the mug?", "", ("", ""), hint="2-4 attribute texts: the second image vs the first."
    ),
    Category.STATE: Template("In which image is the apple peeled more?", binary=True),
    Category.EMOTION: Template("In which image does the person look happier?", binary=True),
    Category.TEMPORAL: Template(
        "Which image was taken later?", binary=True, hint="The answer follows from the timestamps."
    ),
    Category.SPATIAL: Template("How did the cup move?", "", ("", ""), hint="2-3 direction texts."),
    Category.EXISTENCE: Template("What was added in the second image?", "", ("", "", ""), hint="4-5 object texts."),
    Category.QUANTITY: Template("In which image are there more people?", binary=True),
    Category.QUALITY: Template("Which image has better quality?", binary=True),
    Category.VIEWPOINT: Template(
        "How did the camera move from the first image to the second?",
        "",
        ("",),
        hint="2-5 of: " + ", ".join(VIEWPOINT_MOVES) + ".",
        choices=VIEWPOINT_MOVES,
    ),
    Category.ACTION: Template("What did the person do between the two images?", "", ("", ""), hint="2-4 actions."),
}

# Keys 1-9 and 0 pick the categories in the paper's order.
CATEGORY_KEYS = {str((number + 1) % 10): category.value for number, category in enumerate(Category)}


def template_table() -> dict[str, dict]:
    """The templates as plain data for the workbench's JSON blob."""
    return {
        category: {
            "question": t.question,
            "answer": t.answer,
            "distractors": list(t.distractors),
            "binary": t.binary,
            "hint": t.hint,
            "choices": list(t.choices),
            "derived": category == Category.TEMPORAL,
        }
        for category, t in TEMPLATES.items()
    }


def normalised(text: str) -> str:
    """Case- and space-insensitive form used to spot duplicate options."""
    return " ".join(text.split()).casefold()


def question_validate(*, category: str, question: str, answer: str, distractors: list) -> tuple[str, str, list]:
    """Check one question against every rule; return it cleaned (spaces trimmed) or raise Invalid.

    The errors are keyed by field so a form can show each beside its input.
    """
    errors: dict[str, list[str]] = {}
    if category not in Category.values:
        raise Invalid({"category": [f"Unknown category {category!r}: pick one of {', '.join(Category)}."]})
    question = " ".join(str(question or "").split())
    answer = " ".join(str(answer or "").split())
    if not isinstance(distractors, list | tuple):
        raise Invalid({"distractors": ["Distractors must be a list of texts."]})
    distractors = [" ".join(str(text or "").split()) for text in distractors]
    if not question:
        errors.setdefault("question", []).append("The question is empty.")
    if not answer:
        errors.setdefault("answer", []).append("The answer is empty.")
    for number, text in enumerate(distractors, 1):
        if not text:
            errors.setdefault("distractors", []).append(f"Distractor {number} is empty.")
    if not 1 <= len(distractors) <= MAX_OPTIONS - 1:
        errors.setdefault("distractors", []).append(
            f"Give 1 to {MAX_OPTIONS - 1} distractors (at most {MAX_OPTIONS} options in all); got {len(distractors)}."
        )
    if answer and normalised(answer) in {normalised(text) for text in distractors}:
        errors.setdefault("answer", []).append(f"The answer {answer!r} is also among the distractors.")
    seen: set[str] = set()
    for number, text in enumerate(distractors, 1):
        if text and normalised(text) in seen:
            errors.setdefault("distractors", []).append(f"Distractor {number} ({text!r}) repeats another option.")
        seen.add(normalised(text))
    template = TEMPLATES[category]
    options = [answer, *distractors]
    if template.binary and sorted(normalised(o) for o in options) != [FIRST, SECOND]:
        errors.setdefault("answer", []).append(
            f"{category} questions have exactly the options {FIRST!r} and {SECOND!r}."
        )
    if template.choices:
        allowed = {normalised(choice) for choice in template.choices}
        for text in options:
            if text and normalised(text) not in allowed:
                errors.setdefault("answer" if text == answer else "distractors", []).append(
                    f"{text!r} is not a camera move; use {', '.join(template.choices)}."
                )
    if errors:
        raise Invalid(errors)
    if template.binary:
        answer = normalised(answer)
        distractors = [normalised(text) for text in distractors]
    return question, answer, distractors


def answer_position_next(category: str) -> str:
    """FIRST or SECOND: where the correct answer of the next binary pair in this category should sit.

    Counts the category's live pairs (not rejected) and picks the rarer position, so the benchmark cannot be
    answered by always guessing one side.
    """
    counts = dict.fromkeys((FIRST, SECOND), 0)
    rows = (
        Pair.objects.filter(category=category, answer__in=(FIRST, SECOND))
        .exclude(status=Pair.Status.REJECTED)
        .values_list("answer")
        .order_by()
        .annotate(n=Count("id"))
    )
    for answer, n in rows:
        counts[answer] = n
    return FIRST if counts[FIRST] <= counts[SECOND] else SECOND
