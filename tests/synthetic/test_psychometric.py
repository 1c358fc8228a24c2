"""The psychometric fit: it recovers a known curve's crossing, places a step's crossing between its two levels, and
its bootstrap interval is the same on every run. Pure: no database."""

from __future__ import annotations

import numpy as np

from annotator.synthetic.psychometric import Curve, fit_curve, threshold

LEVELS = [10, 20, 30, 40, 50, 60]


def test_it_recovers_the_crossing_of_a_known_curve():
    truth = Curve(a=0.0, b=2.0, guess=0.25, centre=35.0, scale=10.0)  # crosses 62.5% at 35, 75% at 40.49...
    expected = truth.level_at(0.75)
    rng = np.random.default_rng(7)
    n = [4000] * len(LEVELS)
    correct = [int(rng.binomial(4000, truth.accuracy(x))) for x in LEVELS]
    found = threshold(LEVELS, correct, n, guess=0.25, target=0.75, seed=0)
    assert abs(found.level - expected) < 0.5
    assert found.low < expected < found.high
    assert found.high - found.low < 2


def test_a_step_crosses_between_its_two_levels():
    found = threshold(LEVELS, [0, 0, 20, 20, 20, 20], [20] * 6, guess=0.5, target=0.75)
    assert 20 < found.level < 30
    assert 20 < found.low <= found.level <= found.high < 30


def test_the_bootstrap_interval_is_the_same_on_every_run():
    data = (LEVELS, [9, 11, 13, 16, 18, 20], [20] * 6)
    one = threshold(*data, guess=0.5, seed=3)
    again = threshold(*data, guess=0.5, seed=3)
    assert (one.level, one.low, one.high) == (again.level, again.low, again.high)
    assert one.low < one.level < one.high


def test_it_needs_two_levels_with_answers_and_a_target_above_chance():
    assert fit_curve([10, 20], [3, 0], [5, 0], guess=0.5) is None
    assert threshold([10, 20], [3, 5], [5, 5], guess=0.5, target=0.4).level is None
    flat = threshold(LEVELS, [10] * 6, [20] * 6, guess=0.5, target=0.75)
    assert flat.level is None or not 10 <= flat.level <= 60
