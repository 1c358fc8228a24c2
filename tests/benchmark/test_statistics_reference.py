"""The statistics of benchmark/ (standard library only) against scipy and statsmodels, the references every figure of
the app must agree with: Wilson, Cohen's kappa, McNemar, Student's t quantile and the CR1 variance and intervals of
micro and macro means. The data are drawn from seeded generators, so every run checks the same numbers."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import special, stats
from statsmodels.stats.contingency_tables import mcnemar as statsmodels_mcnemar
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from benchmark.intervals import (
    Z95,
    Scored,
    accuracy_interval,
    difference_interval,
    effective_size,
    macro_mean,
    micro_mean,
    variance_floor,
    wilson,
)
from benchmark.paired import EXACT_BELOW, cohen_kappa, mcnemar, panel_kappa, table_kappa
from benchmark.quantiles import incomplete_beta, student_t_quantile, t95

# --- Quantiles --------------------------------------------------------------------------------------------------


def test_z95_is_the_normal_quantile_of_scipy():
    assert Z95 == stats.norm.ppf(0.975)


DEGREES = [1, 2, 3, 4, 5, 6, 7, 9, 11, 14, 19, 29, 39, 49, 99, 199, 499, 999, 9_999, 99_999, 0.5, 1.5, 2.5, 7.25]
PROBABILITIES = [0.6, 0.75, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9995, 0.4, 0.25, 0.1, 0.05, 0.025, 0.001, 0.0005]


@pytest.mark.parametrize("df", DEGREES)
def test_the_t_quantile_is_scipys(df):
    for probability in PROBABILITIES:
        assert student_t_quantile(probability, df) == pytest.approx(stats.t.ppf(probability, df), rel=1e-9, abs=0)


def test_the_t_quantile_is_exact_where_it_has_a_closed_form_and_tends_to_z():
    assert student_t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-13)
    assert student_t_quantile(0.975, 2) == pytest.approx(0.95 / math.sqrt(2 * 0.975 * 0.025), rel=1e-13)
    assert student_t_quantile(0.5, 7) == 0.0 and student_t_quantile(0.025, 7) == -student_t_quantile(0.975, 7)
    assert t95(2) > t95(3) > t95(30) > t95(3000) > Z95 and t95(3000) - Z95 < 1e-3
    for wrong in [(0.0, 3), (1.0, 3), (0.975, 0), (0.975, -1)]:
        with pytest.raises(ValueError):
            student_t_quantile(*wrong)
    with pytest.raises(ValueError):
        t95(1)


def test_the_incomplete_beta_is_scipys():
    chance = random.Random(11)
    for _ in range(300):
        a, b = chance.choice([0.5, 1, 2.5]) * chance.uniform(0.1, 60), chance.uniform(0.1, 60)
        x = chance.random()
        assert incomplete_beta(x, a, b) == pytest.approx(special.betainc(a, b, x), rel=1e-10, abs=1e-15)
    assert incomplete_beta(0.0, 2, 3) == 0.0 and incomplete_beta(1.0, 2, 3) == 1.0


# --- Wilson -----------------------------------------------------------------------------------------------------


def test_wilson_is_statsmodels_wilson():
    for n in [1, 2, 3, 5, 10, 17, 50, 100, 1000]:
        for correct in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            low, high = wilson(Fraction(correct, n), n)
            reference = proportion_confint(correct, n, alpha=0.05, method="wilson")
            assert (low, high) == pytest.approx(reference, abs=1e-12), (correct, n)


def test_wilson_at_the_effective_size_with_t_is_korn_and_graubards_adjusted_size_with_z():
    """Wilson with the quantile t at n equals Wilson with z at n (z / t)^2, the degrees-of-freedom adjusted effective
    size: statsmodels' Wilson on that size and the matching count gives the accuracy interval."""
    chance = random.Random(5)
    for _ in range(40):
        clusters = chance.randint(2, 30)
        scores = [Scored(Fraction(int(chance.random() < 0.7)), f"v{chance.randrange(clusters)}") for _ in range(60)]
        mean = micro_mean(scores)
        size = effective_size(mean, answers=len(scores))
        adjusted = float(size) * (Z95 / t95(mean.clusters)) ** 2
        reference = proportion_confint(float(mean.estimate) * adjusted, adjusted, alpha=0.05, method="wilson")
        assert accuracy_interval(mean, answers=len(scores)) == pytest.approx(reference, abs=1e-12)


# --- Cohen's kappa ----------------------------------------------------------------------------------------------


def labelled_pairs(seed: int, units: int, labels: str) -> list[tuple[str, str]]:
    chance = random.Random(seed)
    pairs = []
    for _ in range(units):
        first = chance.choice(labels)
        pairs.append((first, first if chance.random() < 0.6 else chance.choice(labels)))
    return pairs


def contingency(pairs, labels) -> np.ndarray:
    table = np.zeros((len(labels), len(labels)))
    for a, b in pairs:
        table[labels.index(a), labels.index(b)] += 1
    return table


def cohen_1960_error(table: np.ndarray) -> float:
    """Cohen's (1960) large-sample standard error from the table, with numpy (statsmodels gives the later
    Fleiss-Cohen-Everitt one only)."""
    n = table.sum()
    po = np.trace(table) / n
    pe = (table.sum(1) * table.sum(0)).sum() / n**2
    return math.sqrt(po * (1 - po) / (n * (1 - pe) ** 2))


@pytest.mark.parametrize("seed, units, labels", [(1, 50, "yn"), (2, 11, "yn"), (3, 200, "abc"), (4, 37, "abcd")])
def test_cohens_kappa_is_statsmodels(seed, units, labels):
    pairs = labelled_pairs(seed, units, labels)
    table = contingency(pairs, labels)
    kappa = cohen_kappa(pairs)
    reference = cohens_kappa(table)
    assert kappa.kappa == pytest.approx(reference.kappa, abs=1e-12)
    assert kappa.units == units and float(kappa.observed) == pytest.approx(np.trace(table) / units, abs=1e-15)
    assert kappa.standard_error == pytest.approx(cohen_1960_error(table), rel=1e-12)
    assert kappa.low == pytest.approx(max(-1, kappa.kappa - Z95 * kappa.standard_error), abs=1e-12)


def test_a_panel_kappa_is_statsmodels_on_the_table_whose_units_each_weigh_one():
    """Eleven descriptions, two people on each and a third on four of them: each description's people share one
    unit, so the table holds fractions and sums to 11, and statsmodels' kappa of that table is ours."""
    chance = random.Random(8)
    rows = []
    table = np.zeros((2, 2))
    for unit in range(11):
        judge = chance.random() < 0.6
        people = [judge if chance.random() < 0.75 else not judge for _ in range(3 if unit < 4 else 2)]
        rows += [(unit, judge, person) for person in people]
        for person in people:
            table[int(judge), int(person)] += 1 / len(people)
    kappa = panel_kappa(rows)
    assert kappa.units == 11 and table.sum() == pytest.approx(11)
    assert kappa.kappa == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
    assert kappa.standard_error == pytest.approx(cohen_1960_error(table), rel=1e-12)
    # Every (judge, person) pair taken as a unit: 26 units, another kappa.
    assert cohen_kappa((judge, person) for _, judge, person in rows).units == 26


def test_table_kappa_takes_the_counts_of_a_table():
    pairs = labelled_pairs(9, 40, "yn")
    counts = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    assert table_kappa(counts) == cohen_kappa(pairs)


# --- McNemar ----------------------------------------------------------------------------------------------------


def answers(both_right: int, a_only: int, b_only: int, both_wrong: int) -> list[tuple[bool, bool]]:
    return (
        [(True, True)] * both_right
        + [(True, False)] * a_only
        + [(False, True)] * b_only
        + [(False, False)] * both_wrong
    )


@pytest.mark.parametrize("a_only, b_only", [(1, 0), (7, 2), (3, 3), (0, 12), (13, 11), (9, 15)])
def test_mcnemar_below_the_threshold_is_statsmodels_exact_test(a_only, b_only):
    assert a_only + b_only < EXACT_BELOW
    result = mcnemar(answers(20, a_only, b_only, 5))
    reference = statsmodels_mcnemar([[20, a_only], [b_only, 5]], exact=True)
    assert result.method == "exact binomial"
    assert result.statistic == reference.statistic and result.p_value == pytest.approx(reference.pvalue, rel=1e-12)


@pytest.mark.parametrize("a_only, b_only", [(13, 12), (30, 12), (40, 40), (5, 60), (120, 95)])
def test_mcnemar_from_the_threshold_is_statsmodels_corrected_chi_square(a_only, b_only):
    assert a_only + b_only >= EXACT_BELOW
    result = mcnemar(answers(100, a_only, b_only, 8))
    reference = statsmodels_mcnemar([[100, a_only], [b_only, 8]], exact=False, correction=True)
    assert result.method == "chi-square (continuity-corrected)"
    assert result.statistic == pytest.approx(reference.statistic, rel=1e-12)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)


# --- The CR1 variance and the intervals -------------------------------------------------------------------------


def clustered_scores(seed: int, items: int, clusters: int, strata: str = "") -> list[Scored]:
    """0/1 and rater-mean scores in videos of uneven size, each video leaning its own way."""
    chance = random.Random(seed)
    lean = [chance.random() for _ in range(clusters)]
    scores = []
    for _ in range(items):
        video = min(clusters - 1, int(clusters * chance.random() ** 1.5))
        raters = chance.choice([1, 1, 2, 3])
        value = Fraction(sum(chance.random() < lean[video] for _ in range(raters)), raters)
        scores.append(Scored(value, f"v{video}", chance.choice(strata) if strata else ""))
    return scores


def cluster_fit(y, x, groups):
    return sm.OLS(np.asarray(y, float), x).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)


@pytest.mark.parametrize("seed, items, clusters", [(1, 40, 6), (2, 120, 30), (3, 15, 15), (4, 300, 4)])
def test_the_cr1_variance_of_a_micro_mean_is_statsmodels_clustered_ols(seed, items, clusters):
    """An intercept-only OLS: statsmodels' factor G/(G-1) (N-1)/(N-K) is G/(G-1) with K = 1, so the two agree as
    they are."""
    scores = clustered_scores(seed, items, clusters)
    mean = micro_mean(scores)
    groups = np.array([int(score.cluster[1:]) for score in scores])
    fit = cluster_fit([score.value for score in scores], np.ones((items, 1)), groups)
    assert float(mean.estimate) == pytest.approx(fit.params[0], abs=1e-12)
    assert float(mean.variance) == pytest.approx(fit.cov_params()[0, 0], rel=1e-10)


@pytest.mark.parametrize("seed, items, clusters", [(5, 60, 8), (6, 200, 40)])
def test_the_cr1_variance_of_a_macro_mean_is_statsmodels_on_the_strata_means(seed, items, clusters):
    """The strata's means are the coefficients of an OLS on the strata's dummies; the macro mean is their average,
    its variance a' V a with a = 1/K. statsmodels' factor has (N-1)/(N-K) beside G/(G-1): taken out."""
    strata = "abc"
    scores = clustered_scores(seed, items, clusters, strata)
    mean = macro_mean(scores)
    x = np.array([[float(score.stratum == stratum) for stratum in strata] for score in scores])
    groups = np.array([int(score.cluster[1:]) for score in scores])
    fit = cluster_fit([score.value for score in scores], x, groups)
    weights = np.full(len(strata), 1 / len(strata))
    variance = weights @ fit.cov_params() @ weights / ((items - 1) / (items - len(strata)))
    assert float(mean.estimate) == pytest.approx(weights @ fit.params, abs=1e-12)
    assert float(mean.variance) == pytest.approx(variance, rel=1e-10)


@pytest.mark.parametrize(
    "seed, items, clusters, floored",
    [(8, 150, 25, False), (12, 200, 60, False), (7, 40, 6, True), (10, 80, 10, True), (9, 30, 3, True)],
)
def test_the_gap_interval_is_statsmodels_t_interval_with_the_variance_floor(seed, items, clusters, floored):
    """Humans minus a model per item, clustered OLS on the intercept with t on G - 1 degrees of freedom (statsmodels'
    inference for clustered errors): the same interval where the measured variance is above 1/G^2, the standard
    error 1/G in its place where it is not; clipped to [-1, 1]."""
    humans = clustered_scores(seed, items, clusters)
    model = clustered_scores(seed + 100, items, clusters)
    gaps = [Scored(h.value - m.value, h.cluster) for h, m in zip(humans, model, strict=True)]
    mean = micro_mean(gaps)
    assert (mean.variance < variance_floor(mean.clusters)) is floored
    groups = np.array([int(score.cluster[1:]) for score in gaps])
    fit = cluster_fit([score.value for score in gaps], np.ones((items, 1)), groups)
    assert fit.df_resid_inference == mean.clusters - 1
    if not floored:
        low, high = fit.conf_int(alpha=0.05)[0]
        assert difference_interval(mean) == pytest.approx((max(-1.0, low), min(1.0, high)), abs=1e-10)
    quantile = stats.t.ppf(0.975, fit.df_resid_inference)
    half = quantile * max(fit.bse[0], 1 / mean.clusters)
    expected = (max(-1.0, fit.params[0] - half), min(1.0, fit.params[0] + half))
    assert difference_interval(mean) == pytest.approx(expected, abs=1e-10)
