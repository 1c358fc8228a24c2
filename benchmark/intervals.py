"""95% intervals for accuracies measured on items that share a cluster (a video, a source image): the cluster-robust
(CR1) variance of a mean, exact in rationals, and the intervals the release report prints from it.

Why not Wilson on independent items: two pairs cut from one video are not two independent draws; a rater or a model
that gets one wrong often gets the other wrong too. Counting them as independent makes the interval too narrow.

The variance (CR1, the sandwich estimator with the small-sample factor G/(G-1), G the number of clusters):
every estimate of the report is a weighted mean theta = sum_i w_i * y_i (a micro accuracy: w_i = 1/n; a macro
accuracy: w_i = 1/(K * n_k), the item's category having n_k items and K categories counted). Each item contributes
u_i = w_i * (y_i - mean of its stratum) (the stratum is the whole set for a micro mean, the item's category for a
macro mean); the contributions are summed per cluster, S_g, and

    V = G / (G - 1) * sum_g S_g ** 2.

When every item is its own cluster this is the usual variance of a mean, s**2 / n with s**2 the sample variance
(n - 1 in its denominator): for 0/1 scores, p(1 - p) / (n - 1). With fewer than two clusters nothing can be said of
the spread between clusters: no interval (None).

The accuracy interval: Wilson's score interval at the effective sample size n_eff = p(1 - p) / V (the number of
independent 0/1 answers that would have the variance measured; the approach of Korn & Graubard for survey
proportions). Chosen over a Wald interval on the plain scale (clipped to [0, 1]) or on the logit scale because both
collapse to a single point at 0% and 100%, and 100% is no rare sight in a category of a human baseline (the paper's
humans reach 99%); Wilson stays inside [0, 1] with no clipping and keeps width at the ceiling. Where V says nothing
(p is 0 or 1, so every residual is 0) n_eff is the number of clusters: the cautious end, as if each cluster were one
answer repeated. n_eff is never more than the answers behind the estimate (a V of 0 inside (0, 1), residuals
cancelling within clusters, would otherwise claim infinite precision). Every item its own cluster, 0/1 scores:
n_eff = n - 1, Wilson's interval for n - 1 answers, a shade wider than the textbook one for n.

The gap interval (humans minus a model on the same items, d_i = h_i - m_i in [-1, 1]): Wald on the plain scale,
d +- z * sqrt(V), clipped to [-1, 1]; a difference has no ceiling where the estimate sits.

Everything up to V is exact (fractions, so no sum depends on the order of its terms); the square root and z make the
bounds floats, computed from the exact values in one fixed order, so the same input always gives the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from fractions import Fraction

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile (every interval of the app takes it from here)

METHOD = (
    "95% intervals, cluster-robust: items that share a video or a source image form one cluster; CR1 variance "
    "(sandwich, factor G/(G-1)); accuracies by Wilson's score interval at the effective sample size p(1-p)/V "
    "(the number of clusters at 0% or 100%); gaps by Wald on the paired item differences, clipped to [-1, 1]."
)


@dataclass(frozen=True)
class Scored:
    """One item's score (0..1: a model's 0 or 1, humans' mean over the item's raters), with its cluster and its
    stratum (the category, for a macro mean)."""

    value: Fraction
    cluster: Hashable
    stratum: Hashable = ""


@dataclass(frozen=True)
class Mean:
    """A weighted mean of item scores with its CR1 variance (None with fewer than two clusters)."""

    estimate: Fraction
    variance: Fraction | None
    items: int
    clusters: int


def cluster_robust_variance(contributions: Iterable[tuple[Hashable, Fraction]]) -> Fraction | None:
    """CR1: G/(G-1) times the sum over clusters of the squared sum of the cluster's contributions; None when G < 2."""
    sums: dict[Hashable, Fraction] = {}
    for cluster, contribution in contributions:
        sums[cluster] = sums.get(cluster, Fraction(0)) + contribution
    count = len(sums)
    if count < 2:
        return None
    return Fraction(count, count - 1) * sum((total * total for total in sums.values()), Fraction(0))


def micro_mean(scores: Iterable[Scored]) -> Mean | None:
    """The mean over items, every item weighing the same; None for no item."""
    scores = list(scores)
    if not scores:
        return None
    n = len(scores)
    estimate = sum((score.value for score in scores), Fraction(0)) / n
    variance = cluster_robust_variance((score.cluster, (score.value - estimate) / n) for score in scores)
    return Mean(estimate, variance, n, len({score.cluster for score in scores}))


def macro_mean(scores: Iterable[Scored]) -> Mean | None:
    """The mean of the strata's means (the paper's average over categories), every stratum weighing the same;
    its variance by the same sandwich, each item's residual taken from its own stratum's mean (the delta method for
    a sum of means), summed per cluster across strata: a video with pairs in two categories is still one cluster."""
    scores = list(scores)
    if not scores:
        return None
    strata: dict[Hashable, list[Scored]] = {}
    for score in scores:
        strata.setdefault(score.stratum, []).append(score)
    means = {key: sum((s.value for s in group), Fraction(0)) / len(group) for key, group in strata.items()}
    count = len(strata)
    estimate = sum(means.values(), Fraction(0)) / count
    variance = cluster_robust_variance(
        (s.cluster, (s.value - means[s.stratum]) / (count * len(strata[s.stratum]))) for s in scores
    )
    return Mean(estimate, variance, len(scores), len({score.cluster for score in scores}))


def wilson(p, n, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion p observed on n independent answers (n may be a fraction)."""
    p, n = float(p), float(n)
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def effective_size(mean: Mean, *, answers: int) -> Fraction | None:
    """The number of independent 0/1 answers with the variance measured (see the module's docstring); None with no
    variance."""
    if mean.variance is None:
        return None
    p = mean.estimate
    if p in (0, 1):
        return Fraction(mean.clusters)
    if mean.variance == 0:
        return Fraction(answers)
    return min(p * (1 - p) / mean.variance, Fraction(answers))


def accuracy_interval(mean: Mean, *, answers: int, z: float = Z95) -> tuple[float, float] | None:
    """The 95% interval of an accuracy: Wilson at the effective sample size; None with fewer than two clusters."""
    size = effective_size(mean, answers=answers)
    return None if size is None else wilson(mean.estimate, size, z)


def difference_interval(mean: Mean, z: float = Z95) -> tuple[float, float] | None:
    """The 95% interval of a mean difference in [-1, 1]: Wald, clipped; None with fewer than two clusters."""
    if mean.variance is None:
        return None
    half = z * math.sqrt(mean.variance)
    estimate = float(mean.estimate)
    return max(-1.0, estimate - half), min(1.0, estimate + half)
