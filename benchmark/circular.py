"""Circular evaluation: an item is asked once per rotation of its shown options (A B C, then B C A, then C A B) and
counts as right only when every rotation was answered right, so a model that leans on a letter or a position gains
nothing from it. Rotation 0 is the order the seed's shuffle gave (what a plain run shows). A rotation whose reply
names no shown option is a wrong answer in that rotation (its letter is "", the marker), so the item stays in the
denominator, as the official evaluator scores an unparsable reply."""

from __future__ import annotations

from benchmark.protocol import letter, letter_index


def rotations(options: list[str], correct_index: int) -> list[tuple[list[str], int]]:
    """Each rotation's options and the place of the correct one in it, rotation 0 first."""
    count = len(options)
    return [(options[shift:] + options[:shift], (correct_index - shift) % count) for shift in range(count)]


def circular_correct(flags: list[bool]) -> bool:
    """Right in every rotation (an item with no rotation answered is not right)."""
    return bool(flags) and all(flags)


def rotation_entries(options: list[str], correct_letter: str, letters: list[str]) -> list[dict]:
    """A circular item's rotations for its results-file entry: each rotation's options as shown, its correct letter,
    the letter answered (None for a reply that names no shown option), the parse outcome and whether it was right.
    `options` and `correct_letter` are rotation 0's, `letters` the letters answered, rotation 0 first."""
    entries = []
    for number, ((shown, correct), answered) in enumerate(
        zip(rotations(options, letter_index(correct_letter)), letters, strict=False)
    ):
        entries.append(
            {
                "rotation": number,
                "options": shown,
                "correct_letter": letter(correct),
                "predicted_answer": answered or None,
                "parse_outcome": "parsed" if answered else "unparsable",
                "is_correct": answered == letter(correct),
            }
        )
    return entries
