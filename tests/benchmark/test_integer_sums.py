"""The report's means from integer sums per cluster give the figures of the item-by-item Fraction sums they replace,
exactly: on a fixed world of human scores (shares of 1 to 3 raters), model scores and their gaps, with clusters
spanning categories, every estimate and variance is the same Fraction, and so is every cell of the report. The
item-by-item report kept here is the anchor of bench/report_figures.py and of the database's sums
(tests/evaluation/results/test_report_sums.py)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from benchmark.intervals import (
    Mean,
    Scored,
    accuracy_interval,
    cluster_robust_variance,
    difference_interval,
    macro_mean,
    micro_mean,
)
from benchmark.report import (
    HUMANS,
    Cell,
    Report,
    Row,
    checked_items,
    compute_report,
    report_json,
    scores_of_humans,
    scores_of_model,
    scores_paired,
)
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


def fraction_cell(scored, items, *, gap: bool, raters: bool, macro: bool = False) -> Cell | None:
    """A cell of the report as it was computed before the integer sums: each item a Scored, each mean in Fractions
    item by item."""
    if not scored:
        return None
    values = [Scored(score, items[item_id].cluster, items[item_id].category) for item_id, score, _, _ in scored]
    mean = fraction_macro_mean(values) if macro else fraction_micro_mean(values)
    answers = sum(count for _, _, count, _ in scored)
    bounds = difference_interval(mean) if gap else accuracy_interval(mean, answers=answers)
    low, high = bounds if bounds is not None else (None, None)
    who = len(frozenset().union(*(keys for _, _, _, keys in scored))) if raters else None
    return Cell(mean.estimate, low, high, mean.items, mean.clusters, answers, who)


def fraction_row(label: str, kind: str, scores, items) -> Row:
    scored = sorted((item_id, *value) for item_id, value in scores.items())
    options = {"gap": kind == "gap", "raters": kind != "model"}
    by_category: dict = {}
    by_domain: dict = {}
    for entry in scored:
        by_category.setdefault(items[entry[0]].category, []).append(entry)
        by_domain.setdefault(items[entry[0]].domain, []).append(entry)
    return Row(
        label=label,
        kind=kind,
        categories={c: fraction_cell(by_category.get(c, []), items, **options) for c in CATEGORIES},
        domains={d: fraction_cell(by_domain.get(d, []), items, **options) for d in DOMAINS},
        micro=fraction_cell(scored, items, **options),
        macro=fraction_cell(scored, items, macro=True, **options),
    )


def item_by_item_report(*, release, release_hash, split, items, humans, models, humans_label=HUMANS) -> Report:
    """The anchor: the report computed item by item in Fractions, every cell from its own list of items, as before
    the integer sums (the input read by benchmark.report's own checks). bench/report_figures.py times it."""
    checked = checked_items(items)
    where = f"release {release} ({split})"
    human = scores_of_humans(humans, checked, where)
    scored = {label: scores_of_model(label, answers, checked, where) for label, answers in models.items()}
    labels = sorted(scored)
    return Report(
        release=release,
        release_hash=release_hash,
        split=split,
        items=len(checked),
        humans=fraction_row(humans_label, "humans", human, checked),
        models=tuple(fraction_row(label, "model", scored[label], checked) for label in labels),
        gaps=tuple(
            fraction_row(f"{HUMANS} - {label}", "gap", scores_paired(human, scored[label]), checked) for label in labels
        ),
    )


def fixed_world(seed: int = 7, items: int = 300):
    """The items, human answers (1 to 3 raters an item, on about 4 items in 5) and two models' answers (one answers
    6 items in 7) of a fixed world whose clusters span categories and domains, one category in a single cluster."""
    human, _, clusters, _ = world(seed, items=items)
    rng = random.Random(seed)
    entries = [(f"i{n}", rng.choice(CATEGORIES[:-1]), rng.choice(DOMAINS), clusters[n]) for n in range(items)]
    entries += [(f"alone{n}", CATEGORIES[-1], DOMAINS[0], "one-video") for n in range(3)]
    humans = []
    for n, score in enumerate(human):
        if n % 5 == 4:
            continue
        raters = score.denominator if score.denominator > 1 else rng.randint(1, 2)
        right = score.numerator * raters // score.denominator
        humans += [(f"i{n}", f"r{rng.randrange(40)}-{k}", k < right) for k in range(raters)]
    humans += [("alone0", "r1-0", True), ("alone1", "r1-0", False)]
    ids = [entry[0] for entry in entries]
    models = {
        "m": [(item_id, rng.random() < 0.7) for n, item_id in enumerate(ids) if n % 7],
        "other": [(item_id, rng.random() < 0.5) for item_id in ids],
    }
    return {"release": "v1", "release_hash": "h", "split": "test", "items": entries, "humans": humans}, models


def test_the_report_is_the_same_to_the_last_digit():
    """Every Fraction, interval and count of the report from integer sums is the item-by-item report's: a changed
    figure anywhere (a cell, a count, an interval's bits) fails here."""
    arguments, models = fixed_world()
    integer = compute_report(**arguments, models=models)
    anchor = item_by_item_report(**arguments, models=models)
    assert integer == anchor
    assert report_json(integer) == report_json(anchor)
    # The world reaches what it should: every kind of row, a category of one cluster (no interval), gaps.
    assert integer.humans.categories[CATEGORIES[-1]].low is None and len(integer.gaps) == 2
    assert all(row.macro is not None and row.macro.low is not None for row in integer.rows())
