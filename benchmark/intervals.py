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

Small numbers of clusters: every interval takes its multiplier from Student's t on G - 1 degrees of freedom (t95 in
benchmark.quantiles), not the normal's 1.96. V is itself estimated from only G cluster totals, so it is uncertain when
G is small, and z would treat it as known; t on G - 1 is the usual reference for a cluster-robust mean (Cameron &
Miller, "A practitioner's guide to cluster-robust inference", J. Human Resources 50(2), 2015, section VI; Stata's
default for clustered errors). It multiplies by 12.71 at G = 2, 2.26 at G = 10, 2.01 at G = 50, and within 0.01 of
1.96 from G = 240 on.

The accuracy interval: Wilson's score interval at the effective sample size n_eff = p(1 - p) / V (the number of
independent 0/1 answers that would have the variance measured), with t in place of z. That is exactly the effective
size with Korn & Graubard's degrees-of-freedom adjustment, n_eff * (z / t)^2 (Survey Methodology 24(2), 1998), fed to
Wilson instead of Clopper-Pearson: Wilson with t at n and with z at n (z / t)^2 agree term by term. Chosen over a Wald
interval on the plain scale (clipped to [0, 1]) or on the logit scale because both collapse to a single point at 0%
and 100%, and 100% is no rare sight in a category of a human baseline (the paper's humans reach 99%); Wilson stays
inside [0, 1] with no clipping and keeps width at the ceiling. Where V says nothing (p is 0 or 1, so every residual is
0) n_eff is the number of clusters: the cautious end, as if each cluster were one answer repeated. n_eff is never more
than the answers behind the estimate (a V of 0 inside (0, 1), residuals cancelling within clusters, would otherwise
claim infinite precision). Every item its own cluster, 0/1 scores: n_eff = n - 1 and t on n - 1 degrees of freedom, a
shade wider than the textbook Wilson for n.

The gap interval (humans minus a model on the same items, d_i = h_i - m_i in [-1, 1]): Wald on the plain scale,
d +- t * sqrt(max(V, 1 / G^2)), clipped to [-1, 1]; a difference has no ceiling where the estimate sits. The floor
1 / G^2 keeps a gap from claiming certainty its clusters cannot give. V is 0 whenever every difference is the same
(humans and the model both right on every item of a category; a category of a few items that all differ alike) or the
residuals cancel within clusters, and Wald would then print a point, "+18.8 [18.8, 18.8]". 1 / G^2 is the CR1
variance of a mean of G single answers of which exactly one differs by 1 from the rest: the least spread G clusters
can show, one discordant answer among them. It is the accuracy's cautious rule carried over (each cluster read as one
answer, as a video is one draw of the sample), so the half width is never below t / G (about 2 / G). It is a floor,
the larger of V and 1 / G^2, not a value for V = 0 alone: otherwise one rater's dissent on one item of a category
where all else is equal would give a smaller V, hence a narrower interval, than no dissent at all. It decides where
the measured spread is smaller: nearly constant differences, and a dozen clusters or fewer, where V itself is a rough
estimate from as many cluster totals and is often of the floor's size; with hundreds of clusters it is a fraction of
a point. A score interval for paired proportions (Newcombe's) was the other candidate; it needs a 2x2 table of 0/1
answers, while a human score is a mean over raters (2/3) and the items are clustered.

Everything up to V is exact (fractions, so no sum depends on the order of its terms); the square root and the quantile
make the bounds floats, computed from the exact values in one fixed order, so the same input always gives the same
bits.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from benchmark.quantiles import Z95, t95

METHOD = (
    "95% intervals, cluster-robust: items that share a video or a source image form one cluster; CR1 variance "
    "(sandwich, factor G/(G-1)) and Student's t on G-1 degrees of freedom in place of the normal's 1.96; accuracies "
    "by Wilson's score interval at the effective sample size p(1-p)/V (the number of clusters at 0% or 100%); gaps "
    "by Wald on the paired item differences, the variance never below 1/G^2 (one discordant answer among the G "
    "clusters), clipped to [-1, 1]."
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


def _common_denominator(scores: list[Scored]) -> int:
    return math.lcm(*{Fraction(score.value).denominator for score in scores})


@dataclass(frozen=True)
class Sums:
    """Scores in integer sums: all that a mean and its CR1 variance need, whoever summed them (Python item by item,
    `sums_of`, or the database in one query per run, evaluation.results.report). Every score is an integer over
    `denominator` D; per stratum k (only strata with items) its sum S_k and count n_k; per ordered pair of strata
    (k, j) found together in a cluster, the sums over the clusters c of S_ck S_cj, S_ck n_cj and n_ck n_cj (S_ck and
    n_ck: cluster c's sum and count in stratum k); and G, the number of clusters. Any common denominator gives the
    same figures (each is one Fraction at the end)."""

    denominator: int
    strata: dict[Hashable, tuple[int, int]]
    products: dict[tuple[Hashable, Hashable], tuple[int, int, int]]
    clusters: int

    def parts(self, key, clusters: Mapping[Hashable, int]) -> dict[Hashable, Sums]:
        """The sums split by key(stratum): per value of the key, the sums of its strata (the products of two of
        them), of clusters[value] clusters (a count the sums cannot give). One pass over the products."""
        of = {stratum: key(stratum) for stratum in self.strata}
        strata: dict[Hashable, dict] = {}
        for stratum, value in self.strata.items():
            strata.setdefault(of[stratum], {})[stratum] = value
        products: dict[Hashable, dict] = {part: {} for part in strata}
        for (k, j), value in self.products.items():
            if of[k] == of[j]:
                products[of[k]][k, j] = value
        return {part: Sums(self.denominator, strata[part], products[part], clusters[part]) for part in strata}

    def merged(self, key) -> Sums:
        """The strata renamed by key(stratum) and summed (the products are sums over clusters of products of
        per-cluster sums: they add up the same way)."""
        of = {stratum: key(stratum) for stratum in self.strata}
        strata: dict[Hashable, list[int]] = {}
        for stratum, (total, count) in self.strata.items():
            merged = strata.get(of[stratum])
            if merged is None:
                strata[of[stratum]] = [total, count]
            else:
                merged[0] += total
                merged[1] += count
        products: dict[tuple[Hashable, Hashable], list[int]] = {}
        for (k, j), (ss, sn, nn) in self.products.items():
            merged = products.get((of[k], of[j]))
            if merged is None:
                products[of[k], of[j]] = [ss, sn, nn]
            else:
                merged[0] += ss
                merged[1] += sn
                merged[2] += nn
        return Sums(
            self.denominator,
            {stratum: tuple(value) for stratum, value in strata.items()},
            {pair: tuple(value) for pair, value in products.items()},
            self.clusters,
        )


def sums_of(scores: Iterable[Scored]) -> Sums | None:
    """The integer sums of the scores (see `Sums`): per cluster its sum and count in each stratum, then the products
    of every two of its strata added up over the clusters. None for no score."""
    scores = list(scores)
    if not scores:
        return None
    denominator = _common_denominator(scores)
    cells: dict[Hashable, dict[Hashable, list[int]]] = {}  # cluster: {stratum: [sum, count]}
    for score in scores:
        value = Fraction(score.value)
        cell = cells.setdefault(score.cluster, {}).setdefault(score.stratum, [0, 0])
        cell[0] += value.numerator * (denominator // value.denominator)
        cell[1] += 1
    return sums_of_cells(denominator, cells)


def sums_of_cells(denominator: int, cells: Mapping[Hashable, Mapping[Hashable, list[int]]]) -> Sums:
    """`Sums` from per-cluster sums: {cluster: {stratum: (sum, count)}}, sums over `denominator`."""
    strata: dict[Hashable, list[int]] = {}
    products: dict[tuple[Hashable, Hashable], list[int]] = {}
    for per_stratum in cells.values():
        present = list(per_stratum.items())
        for k, (s_k, n_k) in present:
            stratum = strata.setdefault(k, [0, 0])
            stratum[0] += s_k
            stratum[1] += n_k
            for j, (s_j, n_j) in present:
                product = products.setdefault((k, j), [0, 0, 0])
                product[0] += s_k * s_j
                product[1] += s_k * n_j
                product[2] += n_k * n_j
    return Sums(
        denominator,
        {key: tuple(value) for key, value in strata.items()},
        {pair: tuple(value) for pair, value in products.items()},
        len(cells),
    )


def micro_mean_of_sums(clusters: Iterable[tuple[int, int]], denominator: int = 1) -> Mean | None:
    """`micro_mean` from each cluster's (sum of the item scores times `denominator`, number of items), as a GROUP BY
    gives them: the same Mean through the same `Sums` (one stratum), without a row per item. None for no item."""
    cells = {place: {None: [total, count]} for place, (total, count) in enumerate(clusters) if count}
    return micro_of(sums_of_cells(denominator, cells)) if cells else None


def micro_of(sums: Sums | None) -> Mean | None:
    """The mean over items, every item weighing the same; None for no item. With n items of scores V_i / D, S the
    sum of the V_i and, per cluster c, S_c and n_c its sum and count, the CR1 variance is
    G/(G-1) sum_c ((S_c/D - n_c S/(nD)) / n)^2 = G sum_c (n S_c - n_c S)^2 / ((G-1) n^4 D^2), and
    sum_c (n S_c - n_c S)^2 = n^2 sum_c S_c^2 - 2 n S sum_c S_c n_c + S^2 sum_c n_c^2: the products of `Sums` added
    over every pair of strata. Integers, and one Fraction at the end: the same value as summing each item's
    Fraction."""
    if sums is None:
        return None
    n = sum(count for _, count in sums.strata.values())
    total = sum(value for value, _ in sums.strata.values())
    ss = sn = nn = 0
    for product in sums.products.values():
        ss += product[0]
        sn += product[1]
        nn += product[2]
    count = sums.clusters
    variance = None
    if count >= 2:
        squares = n * n * ss - 2 * n * total * sn + total * total * nn
        variance = Fraction(count * squares, (count - 1) * n**4 * sums.denominator**2)
    return Mean(Fraction(total, n * sums.denominator), variance, n, count)


def macro_of(sums: Sums | None) -> Mean | None:
    """The mean of the strata's means (the paper's average over categories), every stratum weighing the same;
    its variance by the same sandwich, each item's residual taken from its own stratum's mean (the delta method for
    a sum of means), summed per cluster across strata: a video with pairs in two categories is still one cluster.

    In integers: with K strata, stratum k's sum S_k and count n_k, and per cluster c its sum S_ck and count n_ck in
    stratum k, a cluster's summed residual is sum_k (n_k S_ck - n_ck S_k) / (K n_k^2 D); with P = lcm(n_k^2) and
    a_k = P / n_k^2 it is T_c / (K P D), T_c = sum_k a_k (n_k S_ck - n_ck S_k), and
    sum_c T_c^2 = sum_{k,j} a_k a_j (n_k n_j sum_c S_ck S_cj - n_k S_j sum_c S_ck n_cj - n_j S_k sum_c S_cj n_ck
    + S_k S_l sum_c n_ck n_cj), the products of `Sums`. The variance is G sum_c T_c^2 / ((G-1) K^2 P^2 D^2)."""
    if sums is None:
        return None
    strata = sums.strata
    count = len(strata)
    common = math.lcm(*(n for _, n in strata.values()))
    estimate = Fraction(sum(s * (common // n) for s, n in strata.values()), count * common * sums.denominator)
    items = sum(n for _, n in strata.values())
    clusters = sums.clusters
    variance = None
    if clusters >= 2:
        squared = math.lcm(*(n * n for _, n in strata.values()))
        weight = {key: squared // (n * n) for key, (_, n) in strata.items()}
        squares = 0
        for (k, j), (ss, sn, nn) in sums.products.items():
            s_k, n_k = strata[k]
            s_j, n_j = strata[j]
            ns = sums.products[(j, k)][1]  # sum_c S_cj n_ck
            squares += weight[k] * weight[j] * (n_k * n_j * ss - n_k * s_j * sn - n_j * s_k * ns + s_k * s_j * nn)
        variance = Fraction(clusters * squares, (clusters - 1) * count**2 * squared**2 * sums.denominator**2)
    return Mean(estimate, variance, items, clusters)


def micro_mean(scores: Iterable[Scored]) -> Mean | None:
    """The mean over items, every item weighing the same, with its CR1 variance (`micro_of` of `sums_of`); None for
    no item."""
    return micro_of(sums_of(scores))


def macro_mean(scores: Iterable[Scored]) -> Mean | None:
    """The mean of the strata's means with its CR1 variance (`macro_of` of `sums_of`); None for no item."""
    return macro_of(sums_of(scores))


def wilson(p, n, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion p observed on n > 0 independent answers (n may be a fraction), z the
    quantile (the normal's for independent answers; accuracy_interval passes Student's t)."""
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


def accuracy_interval(mean: Mean, *, answers: int) -> tuple[float, float] | None:
    """The 95% interval of an accuracy: Wilson at the effective sample size with t on G - 1 degrees of freedom; None
    with fewer than two clusters."""
    size = effective_size(mean, answers=answers)
    return None if size is None else wilson(mean.estimate, size, t95(mean.clusters))


def variance_floor(clusters: int) -> Fraction:
    """1 / G^2: the CR1 variance of a mean of G single answers, one of them differing by 1 from the others (see the
    module's docstring)."""
    return Fraction(1, clusters * clusters)


def difference_interval(mean: Mean) -> tuple[float, float] | None:
    """The 95% interval of a mean difference in [-1, 1]: Wald with t on G - 1 degrees of freedom, the variance at
    least variance_floor(G), clipped; None with fewer than two clusters."""
    if mean.variance is None:
        return None
    half = t95(mean.clusters) * math.sqrt(max(mean.variance, variance_floor(mean.clusters)))
    estimate = float(mean.estimate)
    return max(-1.0, estimate - half), min(1.0, estimate + half)
