"""Psychometric curves of a sweep (pure: numpy, no Django): accuracy as a logistic function of one factor, fitted
by maximum likelihood, and the factor level at which it crosses a chosen accuracy, with a bootstrap interval.

The curve is p(x) = g + (1 - g) / (1 + exp(-(a + b * z))), z the factor standardised over the levels and g the
guess rate (1 / the number of options: 0.5 for the binary categories). Fitted by Fisher scoring with a small ridge
on a and b, so that data a step function separates perfectly (every answer wrong below a level, right above it)
still gives a finite curve whose crossing lies between those two levels. The bootstrap draws each cell's correct
count again from its own accuracy (a binomial, the same as resampling its items), with a fixed seed. Cells at 0% or
100% never vary in it: a sweep whose every cell is at 0% or 100% (a perfect step) gets an interval of zero width,
and its honest uncertainty is the gap between the two levels around the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RIDGE = 0.1  # a weak prior on the standardised coefficients: finite curves for separated data
ITERATIONS = 100
BOOTSTRAP = 400


@dataclass(frozen=True)
class Curve:
    a: float
    b: float
    guess: float
    centre: float  # the standardisation of the factor: z = (x - centre) / scale
    scale: float

    def accuracy(self, x: float) -> float:
        z = (x - self.centre) / self.scale
        return self.guess + (1 - self.guess) / (1 + math.exp(-(self.a + self.b * z)))

    def level_at(self, target: float) -> float | None:
        """The factor level where the curve reaches `target` accuracy, or None (flat, or a target it never reaches)."""
        if not self.guess < target < 1 or abs(self.b) < 1e-12:
            return None
        share = (target - self.guess) / (1 - self.guess)
        z = (math.log(share / (1 - share)) - self.a) / self.b
        return self.centre + z * self.scale


@dataclass(frozen=True)
class Threshold:
    level: float | None
    low: float | None
    high: float | None
    target: float
    curve: Curve | None


def fit_curve(levels, correct, answered, *, guess: float) -> Curve | None:
    """The maximum-likelihood curve through (level, correct of answered) points; None with fewer than two levels
    that have answers."""
    x = np.asarray(levels, dtype=float)
    k = np.asarray(correct, dtype=float)
    n = np.asarray(answered, dtype=float)
    keep = n > 0
    x, k, n = x[keep], k[keep], n[keep]
    if len(np.unique(x)) < 2:
        return None
    centre = float(x.mean())
    scale = float(x.std()) or 1.0
    z = (x - centre) / scale
    design = np.column_stack([np.ones_like(z), z])

    def objective(beta):
        p = np.clip(guess + (1 - guess) / (1 + np.exp(-np.clip(design @ beta, -500, 500))), 1e-12, 1 - 1e-12)
        return float(np.sum(k * np.log(p) + (n - k) * np.log(1 - p)) - RIDGE / 2 * beta @ beta)

    beta = np.zeros(2)
    value = objective(beta)
    for _ in range(ITERATIONS):
        s = 1 / (1 + np.exp(-np.clip(design @ beta, -500, 500)))
        p = np.clip(guess + (1 - guess) * s, 1e-12, 1 - 1e-12)
        slope = (1 - guess) * s * (1 - s)  # dp / d(eta)
        score = design.T @ ((k - n * p) * slope / (p * (1 - p))) - RIDGE * beta
        weight = n * slope**2 / (p * (1 - p))
        information = design.T @ (design * weight[:, None]) + RIDGE * np.eye(2)
        step = np.linalg.solve(information, score)
        # Fisher scoring, the step halved until the penalised likelihood rises: it never overshoots.
        for _half in range(40):
            candidate = beta + step
            better = objective(candidate)
            if better >= value:
                break
            step = step / 2
        else:
            break
        beta, gain, value = candidate, better - value, better
        if gain < 1e-12 and float(np.abs(step).max()) < 1e-8:
            break
    return Curve(a=float(beta[0]), b=float(beta[1]), guess=guess, centre=centre, scale=scale)


def threshold(levels, correct, answered, *, guess: float, target: float = 0.75, seed: int = 0) -> Threshold:
    """The level at which the fitted curve crosses `target` (None outside the levels swept), and the 2.5 and 97.5
    percentiles of that level over BOOTSTRAP resamples (those whose curve crosses it, censored at the ends)."""
    curve = fit_curve(levels, correct, answered, guess=guess)
    level = curve.level_at(target) if curve else None
    low_end, high_end = min(levels), max(levels)
    # A crossing outside the levels swept is an extrapolation of the curve, not a measurement: none is reported.
    if level is None or not low_end <= level <= high_end:
        return Threshold(None, None, None, target, curve)
    rng = np.random.default_rng(seed)
    n = np.asarray(answered, dtype=int)
    share = np.asarray(correct, dtype=float) / np.maximum(n, 1)
    found = []
    crossings: dict[tuple, float | None] = {}  # a resample drawn before is not fitted again
    for _ in range(BOOTSTRAP):
        again = tuple(int(v) for v in rng.binomial(n, share))
        if again not in crossings:
            fitted = fit_curve(levels, again, n, guess=guess)
            crossings[again] = fitted.level_at(target) if fitted else None
        crossing = crossings[again]
        if crossing is not None and math.isfinite(crossing):
            found.append(min(max(crossing, low_end), high_end))  # censored at the ends of the sweep
    if not found:
        return Threshold(level, None, None, target, curve)
    low, high = np.percentile(found, [2.5, 97.5])
    return Threshold(level, float(low), float(high), target, curve)
