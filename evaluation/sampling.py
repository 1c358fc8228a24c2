"""The stratified sample of a study: pure functions, no ORM, so the rule is easy to read and to test."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass

ROUNDING_RULE = (
    "Strata are category × domain. The sample size is round(fraction × pool), halves rounded up. "
    "Each non-empty stratum first gets fraction × its size rounded down, but at least one item; "
    "the places still left go one each to the strata with the largest remainders "
    "(ties: category, then domain, alphabetically). Within a stratum the items are drawn with "
    "Python's random.Random(seed) from the pool sorted by source, source id and pair id."
)


@dataclass(frozen=True)
class Candidate:
    key: int  # the pair's id
    category: str
    domain: str
    sort_key: tuple = ()


def round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


def allocate(sizes: dict[tuple[str, str], int], fraction: float) -> dict[tuple[str, str], int]:
    """How many items each stratum gets (largest remainder, at least one per non-empty stratum)."""
    strata = sorted(s for s, size in sizes.items() if size > 0)
    total = round_half_up(fraction * sum(sizes[s] for s in strata))
    quotas = {s: fraction * sizes[s] for s in strata}
    counts = {s: min(sizes[s], max(1, math.floor(quotas[s]))) for s in strata}
    left = total - sum(counts.values())
    # sorted() is stable, so equal remainders keep the alphabetical stratum order.
    by_remainder = sorted(strata, key=lambda s: quotas[s] - math.floor(quotas[s]), reverse=True)
    for stratum in by_remainder:
        if left <= 0:
            break
        if counts[stratum] < sizes[stratum] and quotas[stratum] > counts[stratum]:
            counts[stratum] += 1
            left -= 1
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
        sampled.extend(rng.sample(members, counts[stratum]))
    chosen = {c.key for c in sampled}
    rest = sorted((c for c in candidates if c.key not in chosen), key=lambda c: (c.sort_key, c.key))
    extra = rng.sample(rest, min(practice, len(rest)))
    return [c.key for c in sampled], [c.key for c in extra]
