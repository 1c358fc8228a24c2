"""Accuracy, intervals and agreement for human-baseline studies: pure math, no ORM."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from fractions import Fraction

from benchmark.intervals import wilson


def proportion(correct: int, n: int) -> dict:
    """Accuracy with its n and Wilson 95% interval (benchmark.intervals.wilson) over the n answers, ready for a table
    or JSON."""
    interval = wilson(Fraction(correct, n), n) if n > 0 else None
    return {
        "correct": correct,
        "n": n,
        "accuracy": correct / n if n else None,
        "low": interval[0] if interval else None,
        "high": interval[1] if interval else None,
    }


def fleiss_kappa(units: Iterable[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa over units (items) each rated by two or more raters; raters may differ in number per item.

    P_i = sum_j n_ij (n_ij - 1) / (n_i (n_i - 1)); P_bar their mean; p_j the share of all ratings in
    category j; P_e = sum_j p_j^2; kappa = (P_bar - P_e) / (1 - P_e). None when undefined.
    """
    agreements = []
    totals: Counter = Counter()
    for labels in units:
        if len(labels) < 2:
            continue
        counts = Counter(labels)
        m = len(labels)
        agreements.append(sum(c * (c - 1) for c in counts.values()) / (m * (m - 1)))
        totals.update(counts)
    if not agreements:
        return None
    p_bar = sum(agreements) / len(agreements)
    all_ratings = sum(totals.values())
    p_e = sum((c / all_ratings) ** 2 for c in totals.values())
    if p_e == 1:
        return None
    return (p_bar - p_e) / (1 - p_e)


def percent_agreement(units: Iterable[Sequence[Hashable]]) -> float | None:
    """Mean share of agreeing rater pairs per unit (Fleiss' P-bar), for units with two or more ratings."""
    shares = []
    for labels in units:
        m = len(labels)
        if m >= 2:
            shares.append(sum(c * (c - 1) for c in Counter(labels).values()) / (m * (m - 1)))
    return sum(shares) / len(shares) if shares else None


def krippendorff_alpha_nominal(units: Iterable[Sequence[Hashable]]) -> float | None:
    """Krippendorff's alpha for nominal data, from the coincidence matrix; units with one value are not pairable."""
    coincidences: Counter = Counter()
    for labels in units:
        m = len(labels)
        if m < 2:
            continue
        for i, a in enumerate(labels):
            for j, b in enumerate(labels):
                if i != j:
                    coincidences[(a, b)] += 1 / (m - 1)
    n = sum(coincidences.values())
    if n <= 1:
        return None
    marginals: Counter = Counter()
    for (a, _), value in coincidences.items():
        marginals[a] += value
    observed = sum(value for (a, b), value in coincidences.items() if a != b) / n
    expected = sum(marginals[a] * marginals[b] for a in marginals for b in marginals if a != b) / (n * (n - 1))
    if expected == 0:
        return None
    return 1 - observed / expected


def median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
