"""Coverage of the sweep thresholds' 95% intervals (evaluation/results/psychometric.py), by seeded simulation:
sweeps of 6 levels drawn from known curves at 10 and 20 items per cell and guess rates 1/2, 1/3 and 1/4, each
fitted as the sweep page fits it. Prints per setting: how often the interval holds the true crossing (a sweep
with no interval within the levels counts as a miss), how often a level is reported, how often the sweep is a step,
the median and mean error of the level and the interval's median width. With --bootstrap, the same sweeps also get
the parametric bootstrap percentile interval and its bias-corrected form (the alternatives measured against the
profile interval, not used by the app).

Run: python bench/psychometric_coverage.py [--sweeps 1000] [--seed 1] [--bootstrap] [--resamples 200]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluation.results.psychometric import Curve, fit_curves, thresholds  # noqa: E402 (the path above first)

LEVELS = [10, 20, 30, 40, 50, 60]
TARGET = 0.75
# (slope per standard deviation of the levels, the true 75% crossing): a middling curve, a shallow one whose
# crossing lies near the top of the levels, a steep one near the bottom.
CURVES = [(1.5, 33.0), (1.0, 52.0), (3.0, 21.0)]


def true_curve(guess: float, slope: float, crossing: float) -> Curve:
    x = np.asarray(LEVELS, dtype=float)
    centre, scale = float(x.mean()), float(x.std())
    share = (TARGET - guess) / (1 - guess)
    a = math.log(share / (1 - share)) - slope * (crossing - centre) / scale
    return Curve(a, slope, guess, centre, scale)


def bootstrap_intervals(found, correct, answered, guess, resamples, rng):
    """Percentile and bias-corrected percentile intervals from resamples of each sweep's fitted curve; a sweep that
    is a step keeps its own interval (there is no curve to resample)."""
    curved = [i for i, threshold_ in enumerate(found) if threshold_.curve is not None]
    p = np.array([[found[i].curve.accuracy(x) for x in LEVELS] for i in curved])
    n = np.repeat(np.asarray(answered)[curved], resamples, axis=0)
    again = rng.binomial(n, np.repeat(p, resamples, axis=0))
    chunk = 20000  # resamples fitted at once: each holds its starting grid in memory (about 100 points a row)
    curves = [
        c
        for at in range(0, len(n), chunk)
        for c in fit_curves(LEVELS, again[at : at + chunk], n[at : at + chunk], guess=guess)
    ]
    steps = [i for i, curve in enumerate(curves) if curve is None]
    stepped = thresholds(LEVELS, again[steps], n[steps], guess=guess, target=TARGET) if steps else []
    crossings = np.array([np.nan if c is None or c.level_at(TARGET) is None else c.level_at(TARGET) for c in curves])
    for i, step in zip(steps, stepped, strict=True):
        if step.level is not None:
            crossings[i] = step.level
        else:  # a step beyond the levels: below them when most answers are right
            crossings[i] = -1e9 if again[i].sum() / n[i].sum() > TARGET else 1e9
    crossings = np.where(np.isnan(crossings), 1e9, crossings).reshape(len(curved), resamples)
    percentile = [(t.low, t.high) for t in found]
    corrected = list(percentile)
    normal = NormalDist()
    for row, i in enumerate(curved):
        low, high = np.quantile(crossings[row], [0.025, 0.975])
        percentile[i] = corrected[i] = (low, high)
        estimate = found[i].curve.level_at(TARGET)
        if estimate is None:
            continue
        below = (np.sum(crossings[row] < estimate) + 0.5 * np.sum(crossings[row] == estimate)) / resamples
        z0 = normal.inv_cdf(min(max(below, 0.5 / resamples), 1 - 0.5 / resamples))
        shifted = [normal.cdf(2 * z0 + z) for z in (-1.959963984540054, 1.959963984540054)]
        corrected[i] = tuple(np.quantile(crossings[row], shifted))
    return percentile, corrected


def covered(intervals, crossing) -> float:
    hits = [
        low is not None and min(max(low, LEVELS[0]), LEVELS[-1]) <= crossing <= min(high, LEVELS[-1])
        for low, high in intervals
    ]
    return float(np.mean(hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=1000, help="simulated sweeps per setting (default 1000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap", action="store_true", help="also the two bootstrap intervals (slower)")
    parser.add_argument("--resamples", type=int, default=200)
    args = parser.parse_args()
    header = f"{'items':>5} {'guess':>5} {'slope':>5} {'true':>5} | {'profile':>7} {'level':>5} {'step':>5}"
    header += f" {'med err':>7} {'mean err':>8} {'width':>5}"
    if args.bootstrap:
        header += f" | {'pct':>5} {'bc pct':>6}"
    print(header)
    started = time.perf_counter()
    for items in (10, 20):
        for guess in (1 / 2, 1 / 3, 1 / 4):
            for slope, crossing in CURVES:
                curve = true_curve(guess, slope, crossing)
                p = np.array([curve.accuracy(x) for x in LEVELS])
                rng = np.random.default_rng([args.seed, items, round(guess * 1000), round(slope * 10)])
                correct = rng.binomial(items, np.broadcast_to(p, (args.sweeps, len(LEVELS))))
                answered = np.full(correct.shape, items)
                found = thresholds(LEVELS, correct, answered, guess=guess, target=TARGET)
                levels = np.array([t.level for t in found if t.level is not None])
                widths = [t.high - t.low for t in found if t.low is not None]
                line = f"{items:>5} {guess:>5.2f} {slope:>5.1f} {crossing:>5.0f} |"
                line += f" {covered([(t.low, t.high) for t in found], crossing):>7.3f}"
                line += f" {len(levels) / len(found):>5.2f} {np.mean([t.step for t in found]):>5.2f}"
                line += f" {np.median(levels) - crossing:>+7.2f} {levels.mean() - crossing:>+8.2f}"
                line += f" {np.median(widths):>5.1f}"
                if args.bootstrap:
                    boot = np.random.default_rng([args.seed, items, round(guess * 1000), round(slope * 10), 2])
                    pct, bc = bootstrap_intervals(found, correct, answered, guess, args.resamples, boot)
                    line += f" | {covered(pct, crossing):>5.3f} {covered(bc, crossing):>6.3f}"
                print(line, flush=True)
    print(f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
