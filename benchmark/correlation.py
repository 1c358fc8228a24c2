"""Whether the benchmark tracks the world: rank correlations between the models' accuracy here and their scores on
other benchmarks (Spearman and Kendall, with bootstrap intervals over models), and the items' accuracy by their
DINOv3 similarity (binned, with the report's intervals), beside another benchmark's items on the same axes.

Plain data in, plain data out; standard library only. The same input always gives the same figures: the bootstrap
draws from a generator seeded by `SEED`.

- Spearman's rho is Pearson's correlation of the average ranks (ties share the mean of their places), Kendall's tau
  is tau-b (corrected for ties in either list): scipy.stats.spearmanr and scipy.stats.kendalltau's defaults.
- The interval is the percentile bootstrap over models: `RESAMPLES` draws of n models with replacement, the
  statistic of each draw where it is defined (a draw whose models all score the same on one side has none), and the
  2.5th and 97.5th percentiles of those. With fewer than `MIN_MODELS` models there is no interval: a handful of
  models cannot support one, and the page says so rather than print a wide number that looks like a finding.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from benchmark.intervals import Scored, accuracy_interval, micro_mean

SEED = 20240601
RESAMPLES = 2000
MIN_MODELS = 4  # an interval from the bootstrap needs at least this many models
# The similarity bins of the items figure: [0.80, 0.84), ..., [0.96, 1.00], the range the benchmark admits.
SIMILARITY_EDGES = (0.80, 0.84, 0.88, 0.92, 0.96, 1.0)


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the places they take."""
    order = sorted(range(len(values)), key=lambda index: values[index])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        shared = (start + end) / 2 + 1
        for position in range(start, end + 1):
            ranks[order[position]] = shared
        start = end + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    mean_x, mean_y = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mean_x) * (b - mean_y) for a, b in zip(x, y, strict=True))
    sxx = math.fsum((a - mean_x) ** 2 for a in x)
    syy = math.fsum((b - mean_y) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho of two lists of the same models; None with fewer than two models or a constant list."""
    if len(x) != len(y):
        raise ValueError(f"two lists of the same models, got {len(x)} and {len(y)} values")
    if len(x) < 2:
        return None
    return _pearson(average_ranks(x), average_ranks(y))


def kendall(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two lists of the same models; None with fewer than two models or a constant list."""
    if len(x) != len(y):
        raise ValueError(f"two lists of the same models, got {len(x)} and {len(y)} values")
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue  # tied in both: in neither correction
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    left = (concordant + discordant + ties_x) * (concordant + discordant + ties_y)
    if left == 0:
        return None
    return (concordant - discordant) / math.sqrt(left)


def _percentile(sorted_values: list[float], share: float) -> float:
    """The `share` quantile with linear interpolation between order statistics (numpy's default)."""
    place = share * (len(sorted_values) - 1)
    low = math.floor(place)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (place - low)


def bootstrap_interval(
    x: Sequence[float],
    y: Sequence[float],
    statistic: Callable[[Sequence[float], Sequence[float]], float | None],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float, int] | None:
    """The 95% percentile bootstrap interval of `statistic` over models, and how many draws defined it; None with
    fewer than MIN_MODELS models or fewer than half the draws defined."""
    n = len(x)
    if n < MIN_MODELS:
        return None
    generator = random.Random(seed)
    values = []
    for _ in range(resamples):
        picks = [generator.randrange(n) for _ in range(n)]
        value = statistic([x[i] for i in picks], [y[i] for i in picks])
        if value is not None:
            values.append(value)
    if len(values) * 2 < resamples:
        return None
    values.sort()
    return _percentile(values, 0.025), _percentile(values, 0.975), len(values)


@dataclass(frozen=True)
class Estimate:
    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Correlation:
    """Our accuracy against another benchmark's score, over the models both have."""

    models: tuple[tuple[str, float, float], ...]  # (model, accuracy here, score there), by model name
    spearman: Estimate
    kendall: Estimate
    draws: int  # the bootstrap draws that defined the Spearman interval


def correlation(pairs: Iterable[tuple[str, float, float]]) -> Correlation:
    """Spearman and Kendall of (model, our accuracy, their score), with bootstrap intervals over the models."""
    models = tuple(sorted(pairs))
    names = [name for name, _, _ in models]
    if len(set(names)) != len(names):
        raise ValueError("one score per model: " + ", ".join(sorted({n for n in names if names.count(n) > 1})))
    ours = [float(value) for _, value, _ in models]
    theirs = [float(value) for _, _, value in models]
    estimates, draws = [], 0
    for statistic in (spearman, kendall):
        value = statistic(ours, theirs) if len(models) >= 2 else None
        interval = bootstrap_interval(ours, theirs, statistic) if value is not None else None
        if interval is not None and statistic is spearman:
            draws = interval[2]
        estimates.append(Estimate(value, *(interval[:2] if interval else (None, None))))
    return Correlation(models, estimates[0], estimates[1], draws)


@dataclass(frozen=True)
class Bin:
    """Items whose similarity is in [low, high) (the last bin holds its upper edge): their mean accuracy and its 95%
    interval (benchmark.intervals: cluster-robust, items of one cluster counted as one)."""

    low: float
    high: float
    items: int
    accuracy: Fraction | None
    interval: tuple[float, float] | None


def similarity_bins(
    items: Iterable[tuple[float, Fraction, str]], edges: Sequence[float] = SIMILARITY_EDGES
) -> list[Bin]:
    """(similarity, accuracy of the item in 0..1, cluster) binned by similarity; items outside the edges are left
    out (an item under the 0.8 rule, kept by an override, has no bin)."""
    grouped: list[list[Scored]] = [[] for _ in range(len(edges) - 1)]
    for similarity, accuracy, cluster in items:
        for index in range(len(edges) - 1):
            last = index == len(edges) - 2
            if edges[index] <= similarity < edges[index + 1] or (last and similarity == edges[-1]):
                grouped[index].append(Scored(Fraction(accuracy), cluster))
                break
    bins = []
    for index, scores in enumerate(grouped):
        mean = micro_mean(scores) if scores else None
        interval = accuracy_interval(mean, answers=len(scores)) if mean is not None else None
        bins.append(Bin(edges[index], edges[index + 1], len(scores), mean.estimate if mean else None, interval))
    return bins
