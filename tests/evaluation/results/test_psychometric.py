"""The psychometric fit: it is the maximum likelihood of statsmodels and scipy, recovers a known curve's crossing,
reports a step as a step, reports a threshold whenever the fitted curve crosses within the levels, and its
profile-likelihood interval covers the true crossing at the nominal rate in a seeded simulation. Pure: no database."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import optimize, special, stats

from evaluation.results.psychometric import CHI2_95, Curve, fit_curve, fit_curves, threshold, thresholds

LEVELS = [10, 20, 30, 40, 50, 60]


def negative_loglik(a, b, z, correct, answered, guess):
    p = guess + (1 - guess) * special.expit(a + b * np.asarray(z))
    return -float(np.sum(stats.binom.logpmf(correct, answered, p)))


def standardised(curve: Curve, levels=LEVELS):
    return (np.asarray(levels, dtype=float) - curve.centre) / curve.scale


def accuracies(curve: Curve) -> np.ndarray:
    return np.array([curve.accuracy(x) for x in LEVELS])


def true_curve(guess: float, slope: float, crossing: float, target: float = 0.75) -> Curve:
    """A curve of `slope` per standard deviation of LEVELS that crosses `target` at `crossing`."""
    x = np.asarray(LEVELS, dtype=float)
    share = (target - guess) / (1 - guess)
    a = np.log(share / (1 - share)) - slope * (crossing - x.mean()) / x.std()
    return Curve(float(a), slope, guess, float(x.mean()), float(x.std()))


def test_it_recovers_the_crossing_of_a_known_curve():
    truth = Curve(a=0.0, b=2.0, guess=0.25, centre=35.0, scale=10.0)  # crosses 62.5% at 35, 75% at 38.47
    expected = truth.level_at(0.75)
    rng = np.random.default_rng(7)
    n = [4000] * len(LEVELS)
    correct = [int(rng.binomial(4000, truth.accuracy(x))) for x in LEVELS]
    found = threshold(LEVELS, correct, n, guess=0.25, target=0.75)
    assert abs(found.level - expected) < 0.5
    assert found.low < expected < found.high
    assert found.high - found.low < 2
    assert not (found.step or found.low_censored or found.high_censored)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_without_a_guess_rate_the_fit_is_statsmodels_logistic_regression(seed):
    rng = np.random.default_rng(seed)
    answered = rng.integers(5, 30, size=len(LEVELS))
    correct = rng.binomial(answered, special.expit(np.linspace(-1.5, 1.5, len(LEVELS)) + rng.normal(0, 0.5, 6)))
    curve = fit_curve(LEVELS, correct, answered, guess=0.0)
    glm = sm.GLM(
        np.column_stack([correct, answered - correct]),
        sm.add_constant(standardised(curve)),
        family=sm.families.Binomial(),
    ).fit(tol=1e-12)
    assert np.allclose([curve.a, curve.b], glm.params, rtol=0, atol=1e-7)


@pytest.mark.parametrize("guess", [1 / 2, 1 / 3, 1 / 4])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_with_a_guess_rate_the_fit_is_the_minimum_of_the_likelihood(guess, seed):
    rng = np.random.default_rng(seed)
    answered = np.full(len(LEVELS), 15)
    correct = rng.binomial(answered, accuracies(true_curve(guess, 1.2, 35.0)))
    curve = fit_curve(LEVELS, correct, answered, guess=guess)
    z = standardised(curve)
    best = min(
        (
            optimize.minimize(
                lambda ab: negative_loglik(*ab, z, correct, answered, guess),
                start,
                method="Nelder-Mead",
                options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000},
            )
            for start in ([0.0, 0.0], [0.0, 2.0], [1.0, 4.0], [-1.0, 1.0])
        ),
        key=lambda result: result.fun,
    )
    assert negative_loglik(curve.a, curve.b, z, correct, answered, guess) <= best.fun + 1e-9
    assert np.allclose([curve.a, curve.b], best.x, rtol=0, atol=1e-4)


def test_the_interval_ends_are_where_the_likelihood_ratio_reaches_its_95_percent_point():
    assert CHI2_95 == pytest.approx(stats.chi2.ppf(0.95, 1), abs=1e-12)
    correct, answered, guess, target = [9, 11, 13, 16, 18, 20], [20] * 6, 0.5, 0.75
    found = threshold(LEVELS, correct, answered, guess=guess, target=target)
    z = standardised(found.curve)
    top = -negative_loglik(found.curve.a, found.curve.b, z, correct, answered, guess)
    offset = special.logit((target - guess) / (1 - guess))

    def statistic(level):  # the best curve through (level, target), its slope found by scipy
        crossing = (level - found.curve.centre) / found.curve.scale
        result = optimize.minimize_scalar(
            lambda b: negative_loglik(offset - b * crossing, b, z, correct, answered, guess),
            bounds=(-50, 50),
            method="bounded",
            options={"xatol": 1e-10},
        )
        return 2 * (top + result.fun)

    assert found.low < found.level < found.high
    assert statistic(found.low) == pytest.approx(CHI2_95, abs=1e-4)
    assert statistic(found.high) == pytest.approx(CHI2_95, abs=1e-4)
    assert statistic(found.level) == pytest.approx(0, abs=1e-6)
    assert statistic(found.low - 0.5) > CHI2_95 and statistic(found.high + 0.5) > CHI2_95


def test_the_interval_is_the_same_on_every_run():
    data = (LEVELS, [9, 11, 13, 16, 18, 20], [20] * 6)
    one = threshold(*data, guess=0.5)
    again = threshold(*data, guess=0.5)
    assert (one.level, one.low, one.high) == (again.level, again.low, again.high)
    assert one.low < one.level < one.high


def test_a_step_crosses_between_its_two_levels():
    found = threshold(LEVELS, [0, 0, 20, 20, 20, 20], [20] * 6, guess=0.5, target=0.75)
    assert found.step and found.curve is None
    assert (found.level, found.low, found.high) == (25.0, 20.0, 30.0)
    assert fit_curve(LEVELS, [0, 0, 20, 20, 20, 20], [20] * 6, guess=0.5) is None


def test_a_step_through_one_cell_spans_its_neighbours():
    # 5/10, 4/10 at chance, 7/10 between, then all right: a jump at 30 explains every cell at its own accuracy,
    # which no finite curve can do; scipy's best finite curve is less likely, and steeper curves come ever closer.
    correct, answered, guess = [5, 4, 7, 10, 10, 10], [10] * 6, 0.5
    found = threshold(LEVELS, correct, answered, guess=guess)
    assert found.step and (found.level, found.low, found.high) == (30.0, 20.0, 40.0)
    z = (np.asarray(LEVELS) - 35.0) / 10.0
    jump = -sum(stats.binom.logpmf(k, 10, max(guess, k / 10)) for k in correct)
    best = [
        optimize.minimize(
            lambda ab: negative_loglik(*ab, z, correct, answered, guess), [0.0, 1.0], bounds=[(-50, 50), (-cap, cap)]
        ).fun
        for cap in (2, 4, 8)
    ]
    assert best[0] > best[1] > best[2] > jump  # the steeper the curve, the likelier: none is the most likely
    steep = negative_loglik(-2000 * (30 - 35) / 10 + special.logit(0.4), 2000, z, correct, answered, guess)
    assert steep == pytest.approx(jump, abs=1e-6)
    # One more answer right at 20 and a finite curve is the most likely again.
    assert not threshold(LEVELS, [5, 8, 7, 10, 10, 10], answered, guess=guess).step


def test_an_interval_past_the_levels_is_censored_and_flagged():
    found = threshold(LEVELS, [3, 5, 5, 6, 7, 9], [10] * 6, guess=0.25)
    assert found.level is not None and found.high == 60 and found.high_censored and not found.low_censored
    # A crossing fitted past the last level is no level, but the part of its interval within the levels is shown.
    beyond = threshold(LEVELS, [5, 5, 6, 6, 7, 7], [10] * 6, guess=0.5)
    assert beyond.level is None and beyond.curve.level_at(0.75) > 60
    assert beyond.high == 60 and beyond.high_censored and beyond.low > 10


def test_it_needs_two_levels_with_answers_and_a_target_above_chance():
    assert fit_curve([10, 20], [3, 0], [5, 0], guess=0.5) is None
    assert threshold([10, 20], [3, 5], [5, 5], guess=0.5, target=0.4).level is None
    flat = threshold(LEVELS, [10] * 6, [20] * 6, guess=0.5, target=0.75)
    assert flat.level is None or not 10 <= flat.level <= 60


def test_a_threshold_is_reported_whenever_the_fitted_curve_crosses_within_the_levels():
    rng = np.random.default_rng(11)
    slopes = rng.choice([-3.0, -1.0, 0.5, 1.0, 2.0, 4.0], size=600)
    crossings = rng.uniform(0, 70, size=600)
    p = np.array([accuracies(true_curve(0.25, s, c)) for s, c in zip(slopes, crossings, strict=True)])
    correct = rng.binomial(10, p)
    answered = np.full(correct.shape, 10)
    found = thresholds(LEVELS, correct, answered, guess=0.25)
    curves = fit_curves(LEVELS, correct, answered, guess=0.25)
    assert sum(one.step for one in found) > 20  # the steps are exercised too
    for one, curve in zip(found, curves, strict=True):
        if curve is not None:
            crossing = curve.level_at(0.75)
            assert (one.level is not None) == (crossing is not None and 10 <= crossing <= 60)
        if one.level is not None:
            assert one.low <= one.level <= one.high


@pytest.mark.parametrize("items", [10, 20])
@pytest.mark.parametrize("guess", [1 / 2, 1 / 4])
def test_the_95_percent_interval_covers_the_true_crossing(items, guess):
    # 1,000 sweeps of 6 levels per setting (bench/psychometric_coverage.py runs more settings and sizes). A sweep
    # with no interval counts as a miss.
    truth = true_curve(guess, slope=1.5, crossing=33.0)
    rng = np.random.default_rng([20, items, round(guess * 100)])
    correct = rng.binomial(items, np.broadcast_to(accuracies(truth), (1000, len(LEVELS))))
    found = thresholds(LEVELS, correct, np.full(correct.shape, items), guess=guess)
    covered = np.mean([one.low is not None and one.low <= 33.0 <= one.high for one in found])
    reported = np.mean([one.level is not None for one in found])
    assert covered >= 0.93, covered
    assert reported >= 0.96, reported
