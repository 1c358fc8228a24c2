"""Circular evaluation: an item is asked once per rotation of its shown options (A B C, then B C A, then C A B) and
counts as right only when every rotation was answered right, so a model that leans on a letter or a position gains
nothing from it. Rotation 0 is the order the seed's shuffle gave (what a plain run shows)."""

from __future__ import annotations


def rotations(options: list[str], correct_index: int) -> list[tuple[list[str], int]]:
    """Each rotation's options and the place of the correct one in it, rotation 0 first."""
    count = len(options)
    return [(options[shift:] + options[:shift], (correct_index - shift) % count) for shift in range(count)]


def circular_correct(flags: list[bool]) -> bool:
    """Right in every rotation (an item with no rotation answered is not right)."""
    return bool(flags) and all(flags)
