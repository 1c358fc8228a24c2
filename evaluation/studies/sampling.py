"""The stratified sample of a study: pure functions, no ORM, so the rule is easy to read and to test. The counts
per stratum are the benchmark's apportionment (`benchmark.apportion`), the one rule the export's split uses too."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from benchmark.apportion import apportion_sizes, exact, round_half_up

ROUNDING_RULE = (
    "Stratified by category, and by domain within each category. The sample size is round(fraction × pool), "
    "halves rounded up, but never fewer than one item per category in the pool (so a small pool may draw more: "
    "10% of 13 items in 7 categories draws 7). Each category gets its share rounded down, but at least one item; "
    "the places left go one each to the categories with the largest remainders. Each category's items are then "
    "split over its domains the same way, without the minimum of one. Equal remainders go in the order of a hash "
    "of the study's seed and the category (or domain), sha256(f'{seed}:{name}'), so that no category always wins a "
    "tie. The pool leaves out every pair that is a practice item in any study; practice items are drawn from those "
    "first, then from the rest less every pair scored (or used as an attention check) in any study. Within a "
    "category × domain "
    "stratum the items are drawn with Python's random.Random(seed) from the pool sorted by item id (studies "
    "before releases: by source, source id and pair id), so the same pool, "
    "fraction and seed always give the same sample."
)


@dataclass(frozen=True)
class Candidate:
    key: int  # the release item's id (before releases: the pair's)
    category: str
    domain: str
    sort_key: tuple = ()


def allocate(sizes: dict[tuple[str, str], int], fraction: float, seed: int) -> dict[tuple[str, str], int]:
    """How many items each (category, domain) stratum gets; see ROUNDING_RULE."""
    total = round_half_up(exact(fraction) * sum(sizes.values()))
    by_category: dict[str, dict[str, int]] = defaultdict(dict)
    for (category, domain), size in sizes.items():
        if size > 0:
            by_category[category][domain] = size
    per_category = apportion_sizes({c: sum(d.values()) for c, d in by_category.items()}, total, seed=seed, minimum=1)
    counts = {}
    for category, domains in by_category.items():
        for domain, count in apportion_sizes(domains, per_category[category], seed=seed).items():
            counts[(category, domain)] = count
    return counts


def draw(
    candidates: list[Candidate],
    fraction: float,
    seed: int,
    practice: int = 0,
    practice_excluded=frozenset(),
    practice_first: list[Candidate] = (),
) -> tuple[list, list]:
    """The sampled keys (stratified) and `practice` more keys: from `practice_first` (practice items elsewhere, never
    sampled) as far as they go, then from the rest less `practice_excluded` (keys scored elsewhere); both in a stable
    order.

    The same candidates, fraction and seed always give the same result: one random.Random(seed), strata
    visited in sorted order, members sorted by their sort key (never by hash or database order).
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    strata: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        strata[(candidate.category, candidate.domain)].append(candidate)
    counts = allocate({s: len(members) for s, members in strata.items()}, fraction, seed)
    rng = random.Random(seed)
    sampled: list[Candidate] = []
    for stratum in sorted(strata):
        members = sorted(strata[stratum], key=lambda c: (c.sort_key, c.key))
        sampled.extend(rng.sample(members, counts.get(stratum, 0)))
    chosen = {c.key for c in sampled}

    def stable(members):
        return sorted(members, key=lambda c: (c.sort_key, c.key))

    again = stable(practice_first)
    extra = rng.sample(again, min(practice, len(again)))
    rest = stable(c for c in candidates if c.key not in chosen and c.key not in practice_excluded)
    extra += rng.sample(rest, min(practice - len(extra), len(rest)))
    return [c.key for c in sampled], [c.key for c in extra]
