"""Pure math of human-baseline studies, checked against values worked out by hand."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from benchmark.apportion import apportion_sizes
from benchmark.intervals import Z95, wilson
from evaluation.studies import metrics, sampling


def test_it_computes_the_wilson_interval_worked_out_by_hand():
    # 8 of 10, z = 1.96: centre (0.8 + 1.96²/20) / (1 + 1.96²/10) = 0.99208 / 1.38416 = 0.71674;
    # half-width 1.96 · sqrt(0.8·0.2/10 + 1.96²/400) / 1.38416 = 1.96 · 0.16001 / 1.38416 = 0.22658.
    low, high = wilson(Fraction(8, 10), 10, z=1.96)
    assert low == pytest.approx(0.71674 - 0.22658, abs=1e-4)
    assert high == pytest.approx(0.71674 + 0.22658, abs=1e-4)
    # All correct: the lower bound is n / (n + z²) = 10 / 13.8416, the upper bound 1.
    low, high = wilson(Fraction(10, 10), 10, z=1.96)
    assert low == pytest.approx(10 / 13.8416, abs=1e-4)
    assert high == 1.0
    # A study's proportion is that Wilson over its answers, at the normal's 97.5% quantile.
    stats = metrics.proportion(8, 10)
    assert (stats["low"], stats["high"]) == wilson(Fraction(8, 10), 10, z=Z95)
    assert metrics.proportion(0, 0)["low"] is None and metrics.proportion(0, 0)["high"] is None


def test_it_reports_a_proportion_with_n_and_interval():
    stats = metrics.proportion(3, 4)
    assert stats["accuracy"] == 0.75 and stats["n"] == 4 and stats["low"] < 0.75 < stats["high"]
    assert metrics.proportion(0, 0)["accuracy"] is None


def test_it_computes_fleiss_kappa_worked_out_by_hand():
    # Three items, two raters: AA, AB, BB. P_i = 1, 0, 1 so P̄ = 2/3; p_A = p_B = 1/2 so P_e = 1/2;
    # kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    assert metrics.fleiss_kappa([["A", "A"], ["A", "B"], ["B", "B"]]) == pytest.approx(1 / 3)
    # Three raters: AAA, AAB. P_i = 1, (2·1)/(3·2) = 1/3 → P̄ = 2/3; p_A = 5/6, p_B = 1/6 → P_e = 26/36;
    # kappa = (2/3 - 26/36) / (10/36) = (24/36 - 26/36) / (10/36) = -0.2.
    assert metrics.fleiss_kappa([["A", "A", "A"], ["A", "A", "B"]]) == pytest.approx(-0.2)
    assert metrics.fleiss_kappa([["A"], ["B"]]) is None
    assert metrics.percent_agreement([["A", "A"], ["A", "B"], ["B", "B"]]) == pytest.approx(2 / 3)


def test_it_computes_krippendorffs_alpha_worked_out_by_hand():
    # AA, AB, BB: coincidences o_AA = 2, o_AB = o_BA = 1, o_BB = 2; n = 6, n_A = n_B = 3.
    # D_o = 2/6; D_e = (3·3 + 3·3) / (6·5) = 0.6; alpha = 1 - (1/3)/0.6 = 4/9.
    assert metrics.krippendorff_alpha_nominal([["A", "A"], ["A", "B"], ["B", "B"]]) == pytest.approx(4 / 9)
    # A unit with one value is not pairable and changes nothing.
    assert metrics.krippendorff_alpha_nominal([["A", "A"], ["A", "B"], ["B", "B"], ["A"]]) == pytest.approx(4 / 9)
    assert metrics.krippendorff_alpha_nominal([["A", "A"], ["B", "B"]]) == pytest.approx(1.0)


def test_it_allocates_by_largest_remainder_with_one_per_category():
    # Pool 40, fraction 0.1 → 4 places. Quotas 1.5, 1.5, 1.0 → 1 each, the last place to one of the tied .5s: the
    # one the seed's hash puts first (benchmark.apportion), not always the same one.
    tied = {("a", "x"): 15, ("b", "x"): 15, ("c", "x"): 10}
    assert sampling.allocate(tied, 0.1, seed=0) == {("a", "x"): 2, ("b", "x"): 1, ("c", "x"): 1}
    assert sampling.allocate(tied, 0.1, seed=4) == {("a", "x"): 1, ("b", "x"): 2, ("c", "x"): 1}
    # Categories: a 28 (quota 2.8), b 12 (1.2) → 2 and 1, the last place to a (remainder .8 > .2).
    # Within a: 3 × 25/28 = 2.68 and 3 × 3/28 = 0.32 → 2 and 0, the last place to x.
    assert sampling.allocate({("a", "x"): 25, ("a", "y"): 3, ("b", "x"): 12}, 0.1, seed=0) == {
        ("a", "x"): 3,
        ("a", "y"): 0,
        ("b", "x"): 1,
    }
    # A category whose quota is 0.29 still gets one item: 10 places, quotas 9.71 and 0.29 → 9 and 1.
    assert sampling.allocate({("a", "x"): 100, ("b", "y"): 3}, 0.1, seed=0) == {("a", "x"): 9, ("b", "y"): 1}
    # The minimum may push the total above round(fraction × pool): 2 places, three categories of 5.
    assert sum(sampling.allocate({("a", "x"): 5, ("b", "x"): 5, ("c", "x"): 5}, 0.1, seed=0).values()) == 3


def test_the_allocation_is_exact_where_floats_would_break_a_tie_or_a_half():
    # Quotas 4/3, 1/3, 1/3: b's and c's remainders (1/3) and a's (4/3 - 1) are equal, so the place left goes by the
    # seed's hash among the three; with floats 4/3 - 1 is 0.33333333333333326, a never won it.
    winners = {
        next(g for g, n in apportion_sizes({"a": 4, "b": 1, "c": 1}, 2, seed=seed).items() if n > {"a": 1}.get(g, 0))
        for seed in range(20)
    }
    assert winners == {"a", "b", "c"}
    # 0.94 × 1075 = 1010.5, a half, rounded up (the float product is just below it and gave 1010).
    assert sampling.allocate({("a", "x"): 1075}, 0.94, seed=0) == {("a", "x"): 1011}


def candidates():
    return [
        sampling.Candidate(i, ["temporal", "state", "action"][i % 3], ["natural", "gaming"][i % 2], ("yt8m", f"v{i}"))
        for i in range(1, 121)
    ]


def test_it_draws_the_same_sample_for_the_same_pool_fraction_and_seed_in_any_input_order():
    first = sampling.draw(candidates(), 0.1, seed=7, practice=3)
    shuffled = candidates()
    random.Random(1).shuffle(shuffled)
    assert sampling.draw(shuffled, 0.1, seed=7, practice=3) == first
    assert sampling.draw(candidates(), 0.1, seed=8, practice=3) != first


def test_it_stratifies_the_sample_and_keeps_practice_items_out_of_it():
    sampled, practice = sampling.draw(candidates(), 0.1, seed=0, practice=3)
    by_key = {c.key: c for c in candidates()}
    strata = {(by_key[k].category, by_key[k].domain) for k in sampled}
    assert len(sampled) == 12 and len(strata) == 6  # six strata of 20: two each
    assert not set(practice) & set(sampled) and len(practice) == 3


def test_it_refuses_a_fraction_outside_zero_to_one():
    with pytest.raises(ValueError, match="fraction"):
        sampling.draw(candidates(), 0, seed=0)
