"""The report's means from integer sums per cluster give the figures of the item-by-item Fraction sums they replace,
exactly: on a fixed world of human scores (shares of 1 to 3 raters), model scores and their gaps, with clusters
spanning categories, every estimate and variance is the same Fraction, and so is every cell of the report."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from benchmark import intervals
from benchmark.intervals import Mean, Scored, cluster_robust_variance, macro_mean, micro_mean
from benchmark.report import compute_report
from benchmark.taxonomy import CATEGORIES, DOMAINS


def fraction_micro_mean(scores) -> Mean | None:
    """The definition, item by item in Fractions (the code the integer sums replaced)."""
    scores = list(scores)
    if not scores:
        return None
    n = len(scores)
    estimate = sum((score.value for score in scores), Fraction(0)) / n
    variance = cluster_robust_variance((score.cluster, (score.value - estimate) / n) for score in scores)
    return Mean(estimate, variance, n, len({score.cluster for score in scores}))


def fraction_macro_mean(scores) -> Mean | None:
    scores = list(scores)
    if not scores:
        return None
    strata: dict = {}
    for score in scores:
        strata.setdefault(score.stratum, []).append(score)
    means = {key: sum((s.value for s in group), Fraction(0)) / len(group) for key, group in strata.items()}
    count = len(strata)
    estimate = sum(means.values(), Fraction(0)) / count
    variance = cluster_robust_variance(
        (s.cluster, (s.value - means[s.stratum]) / (count * len(strata[s.stratum]))) for s in scores
    )
    return Mean(estimate, variance, len(scores), len({score.cluster for score in scores}))


def world(seed: int, items: int = 400):
    rng = random.Random(seed)
    human = [Fraction(rng.randint(0, raters), raters) for raters in (rng.randint(1, 3) for _ in range(items))]
    model = [Fraction(rng.randint(0, 1)) for _ in range(items)]
    clusters = [f"video{rng.randint(0, items // 5)}" for _ in range(items)]  # some clusters span categories
    strata = [rng.choice(CATEGORIES[:7]) for _ in range(items)]
    return human, model, clusters, strata


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_integer_sums_give_the_fraction_sums_exactly(seed):
    human, model, clusters, strata = world(seed)
    for values in (human, model, [h - m for h, m in zip(human, model, strict=True)]):
        scored = [Scored(v, c, s) for v, c, s in zip(values, clusters, strata, strict=True)]
        assert micro_mean(scored) == fraction_micro_mean(scored)
        assert macro_mean(scored) == fraction_macro_mean(scored)
    one_cluster = [Scored(v, "one", s) for v, s in zip(human, strata, strict=True)]
    assert micro_mean(one_cluster) == fraction_micro_mean(one_cluster) and micro_mean(one_cluster).variance is None
    assert micro_mean([]) is None and macro_mean([]) is None


def test_the_report_is_the_same_to_the_last_digit(monkeypatch):
    human, model, clusters, _ = world(7, items=300)
    rng = random.Random(7)
    items = [(f"i{n}", rng.choice(CATEGORIES), rng.choice(DOMAINS), clusters[n]) for n in range(300)]
    humans = []
    for n, score in enumerate(human):
        raters = score.denominator if score.denominator > 1 else rng.randint(1, 2)
        right = score.numerator * raters // score.denominator
        humans += [(f"i{n}", f"r{k}", k < right) for k in range(raters)]
    models = {"m": [(f"i{n}", bool(v)) for n, v in enumerate(model) if n % 7]}
    arguments = {"release": "v1", "release_hash": "h", "split": "test", "items": items, "humans": humans}
    integer = compute_report(**arguments, models=models)
    monkeypatch.setattr(intervals, "micro_mean", fraction_micro_mean)
    monkeypatch.setattr(intervals, "macro_mean", fraction_macro_mean)
    from benchmark import report as reports

    monkeypatch.setattr(reports, "micro_mean", fraction_micro_mean)
    monkeypatch.setattr(reports, "macro_mean", fraction_macro_mean)
    assert compute_report(**arguments, models=models) == integer
