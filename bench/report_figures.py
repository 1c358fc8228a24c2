"""The release report's figures at scale: `micro_mean` of 45,000 items and the whole report (humans on 10% of the
items, two models) from integer sums per cluster (benchmark/intervals.py) against the item-by-item Fraction sums
they replaced (kept here as the anchor), in one run, with both results compared (they must be identical).

Run: python bench/report_figures.py [--items 45000]   (no Django, no database)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark import intervals  # noqa: E402
from benchmark import report as reports  # noqa: E402
from benchmark.intervals import Mean, Scored, cluster_robust_variance  # noqa: E402
from benchmark.taxonomy import CATEGORIES, DOMAINS  # noqa: E402


def fraction_micro_mean(scores):
    scores = list(scores)
    if not scores:
        return None
    n = len(scores)
    estimate = sum((score.value for score in scores), Fraction(0)) / n
    variance = cluster_robust_variance((score.cluster, (score.value - estimate) / n) for score in scores)
    return Mean(estimate, variance, n, len({score.cluster for score in scores}))


def fraction_macro_mean(scores):
    scores = list(scores)
    if not scores:
        return None
    strata = {}
    for score in scores:
        strata.setdefault(score.stratum, []).append(score)
    means = {key: sum((s.value for s in group), Fraction(0)) / len(group) for key, group in strata.items()}
    count = len(strata)
    estimate = sum(means.values(), Fraction(0)) / count
    variance = cluster_robust_variance(
        (s.cluster, (s.value - means[s.stratum]) / (count * len(strata[s.stratum]))) for s in scores
    )
    return Mean(estimate, variance, len(scores), len({score.cluster for score in scores}))


def cpu(function, *args, repeat: int = 3, **kwargs):
    best, result = None, None
    for _ in range(repeat):
        started = time.process_time()
        result = function(*args, **kwargs)
        spent = time.process_time() - started
        best = spent if best is None else min(best, spent)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=45000)
    args = parser.parse_args()
    rng = random.Random(0)
    n = args.items
    clusters = [f"video{rng.randrange(n // 2)}" for _ in range(n)]  # about two items a video
    scored = [Scored(Fraction(rng.randint(0, 1)), clusters[i], rng.choice(CATEGORIES)) for i in range(n)]
    old, old_mean = cpu(fraction_micro_mean, scored)
    new, new_mean = cpu(intervals.micro_mean, scored)
    print(f"micro_mean of {n} items: Fraction sums {1000 * old:.1f} ms CPU, integer sums {1000 * new:.1f} ms CPU; "
          f"identical: {old_mean == new_mean}")  # fmt: skip

    items = [(f"i{i}", rng.choice(CATEGORIES), rng.choice(DOMAINS), clusters[i]) for i in range(n)]
    humans = []
    for i in range(0, n, 10):  # a study of 10% of the items, two or three raters each
        for rater in range(rng.randint(2, 3)):
            humans.append((f"i{i}", f"r{rng.randrange(200)}-{rater}", rng.random() < 0.9))
    models = {label: [(f"i{i}", rng.random() < p) for i in range(n)] for label, p in (("a", 0.7), ("b", 0.6))}
    arguments = {"release": "v1", "release_hash": "h", "split": "test", "items": items, "humans": humans}
    new, integer = cpu(reports.compute_report, **arguments, models=models, repeat=1)
    reports.micro_mean, reports.macro_mean = fraction_micro_mean, fraction_macro_mean
    old, fraction = cpu(reports.compute_report, **arguments, models=models, repeat=1)
    print(f"the report of {n} items (humans on {len(humans)} answers, 2 models): Fraction sums {old:.2f} CPU-s, "
          f"integer sums {new:.2f} CPU-s; identical figures: {integer == fraction}")  # fmt: skip


if __name__ == "__main__":
    main()
