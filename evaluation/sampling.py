"""The stratified sample of a study: pure functions, no ORM, so the rule is easy to read and to test."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

ROUNDING_RULE = (
    "Stratified by category, and by domain within each category. The sample size is round(fraction × pool), "
    "halves rounded up. Each category gets its share rounded down, but at least one item; the places left go "
    "one each to the categories with the largest remainders. Each category's items are then split over its "
    "domains the same way, without the minimum of one. Ties go alphabetically. Within a category × domain "
    "stratum the items are drawn with Python's random.Random(seed) from the pool sorted by source, source id "
    "and pair id, so the same pool, fraction and seed always give the same sample."
)


@dataclass(frozen=True)
class Candidate:
    key: int  # the pair's id
    category: str
    domain: str
    sort_key: tuple = ()


def exact(value) -> Fraction:
    """The value a person typed, as an exact rational: 0.94 is 47/50, not the float just below it."""
    return value if isinstance(value, Fraction) else Fraction(str(value))


def round_half_up(value) -> int:
    # Exact, so a product that is a half in decimal is one here: 0.94 × 1075 = 1010.5 gives 1011 (floats: 1010).
    return math.floor(exact(value) + Fraction(1, 2))


def largest_remainder(sizes: dict, total: int, at_least_one: bool = False) -> dict:
    """Split `total` over groups in proportion to their sizes: floors first, then the largest remainders.

    With at_least_one every non-empty group gets one item even if that makes the sum exceed `total`.
    No group gets more than its size. Equal remainders go to the group that sorts first.
    """
    groups = sorted(g for g, size in sizes.items() if size > 0)
    pool = sum(sizes[g] for g in groups)
    if not groups or total <= 0:
        return {g: (1 if at_least_one else 0) for g in groups}
    # Quota of g = total × size / pool, kept as integers: with floats, remainders that are equal (1/3 and 4/3 - 1)
    # compare unequal and the tie no longer goes alphabetically.
    scaled = {g: total * sizes[g] for g in groups}
    counts = {g: min(sizes[g], scaled[g] // pool) for g in groups}
    if at_least_one:
        counts = {g: max(1, c) for g, c in counts.items()}
    left = total - sum(counts.values())
    # sorted() is stable, so equal remainders keep the alphabetical order.
    for group in sorted(groups, key=lambda g: scaled[g] % pool, reverse=True):
        if left <= 0:
            break
        if counts[group] < sizes[group] and scaled[group] > counts[group] * pool:
            counts[group] += 1
            left -= 1
    return counts


def allocate(sizes: dict[tuple[str, str], int], fraction: float) -> dict[tuple[str, str], int]:
    """How many items each (category, domain) stratum gets; see ROUNDING_RULE."""
    total = round_half_up(exact(fraction) * sum(sizes.values()))
    by_category: dict[str, dict[str, int]] = defaultdict(dict)
    for (category, domain), size in sizes.items():
        if size > 0:
            by_category[category][domain] = size
    per_category = largest_remainder({c: sum(d.values()) for c, d in by_category.items()}, total, at_least_one=True)
    counts = {}
    for category, domains in by_category.items():
        for domain, count in largest_remainder(domains, per_category[category]).items():
            counts[(category, domain)] = count
    return counts


def draw(candidates: list[Candidate], fraction: float, seed: int, practice: int = 0) -> tuple[list, list]:
    """The sampled keys (stratified) and `practice` more keys from the rest, both in a stable order.

    The same candidates, fraction and seed always give the same result: one random.Random(seed), strata
    visited in sorted order, members sorted by their sort key (never by hash or database order).
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    strata: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        strata[(candidate.category, candidate.domain)].append(candidate)
    counts = allocate({s: len(members) for s, members in strata.items()}, fraction)
    rng = random.Random(seed)
    sampled: list[Candidate] = []
    for stratum in sorted(strata):
        members = sorted(strata[stratum], key=lambda c: (c.sort_key, c.key))
        sampled.extend(rng.sample(members, counts.get(stratum, 0)))
    chosen = {c.key for c in sampled}
    rest = sorted((c for c in candidates if c.key not in chosen), key=lambda c: (c.sort_key, c.key))
    extra = rng.sample(rest, min(practice, len(rest)))
    return [c.key for c in sampled], [c.key for c in extra]
