"""Apportionment: whole numbers in proportion to shares, by one rule (largest remainders, ties by a seeded hash)
and one rounding (`round_half_up`). The export's val split and a study's stratified sample both count with it."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Mapping
from fractions import Fraction

TIE_RULE = (
    "Largest remainders: each group gets the floor of its share, then the places left go one each to the groups "
    "with the largest remainders; equal remainders go in the order of sha256(f'{seed}:{group}'), so that no group "
    "always wins a tie."
)


def exact(value) -> Fraction:
    """A number as an exact rational; a float as the decimal it prints as (0.94 is 47/50, not the float just
    below it), since a fraction comes from a person or a setting who wrote a decimal."""
    return (
        value if isinstance(value, Fraction) else Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    )


def round_half_up(value) -> int:
    """The nearest whole number, halves up (2.5 -> 3): Python's round() would give 2, its halves going to even.
    Exact: 0.94 x 1075 is 1010.5 and gives 1011 (the float product is just below the half and would give 1010)."""
    return math.floor(exact(value) + Fraction(1, 2))


def tie_order(seed, key: Hashable) -> bytes:
    """The place of a group among groups with equal remainders: a hash of the seed and the group."""
    return hashlib.sha256(f"{seed}:{key}".encode()).digest()


def apportion(shares: Mapping, total: int, *, seed, minimum: int = 0, caps: Mapping | None = None) -> dict:
    """Whole numbers for each key of `shares` summing to `total` (see TIE_RULE), in exact arithmetic: remainders
    that are equal (4/3 - 1 and 1/3) are equal here, so a tie always goes by the rule, never by float rounding.

    `minimum`: every key gets at least this many, even if the sum then exceeds `total`. `caps`: no key gets more
    than its cap. A key lifted by the minimum above its share gets no remainder place.
    """
    shares = {key: exact(share) for key, share in shares.items()}
    counts = {key: math.floor(share) for key, share in shares.items()}
    if caps is not None:
        counts = {key: min(caps[key], count) for key, count in counts.items()}
    counts = {key: max(minimum, count) for key, count in counts.items()}
    left = total - sum(counts.values())
    ranked = sorted(shares, key=lambda key: (math.floor(shares[key]) - shares[key], tie_order(seed, key)))
    for key in ranked:
        if left <= 0:
            break
        if (caps is None or counts[key] < caps[key]) and shares[key] > counts[key]:
            counts[key] += 1
            left -= 1
    return counts


def apportion_sizes(sizes: Mapping, total: int, *, seed, minimum: int = 0) -> dict:
    """`total` split over the groups of `sizes` in proportion to their sizes (`apportion` with the shares
    total × size / pool), no group above its size; groups of size 0 are left out."""
    groups = [key for key, size in sizes.items() if size > 0]
    pool = sum(sizes[key] for key in groups)
    if not groups:
        return {}
    shares = {key: Fraction(total * sizes[key], pool) for key in groups}
    return apportion(shares, total, seed=seed, minimum=minimum, caps={key: sizes[key] for key in groups})
