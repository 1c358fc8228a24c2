"""Cluster-robust intervals, worked by hand: items that share a video widen the interval; items each their own cluster
give the textbook variance of a mean (n - 1 in the denominator); a paired gap is narrower than two separate means; the
multiplier is Student's t on G - 1 degrees of freedom (the quantiles quoted are scipy.stats.t.ppf's); a gap whose
differences are all equal still has width."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from benchmark.intervals import (
    Z95,
    Mean,
    Scored,
    accuracy_interval,
    cluster_robust_variance,
    difference_interval,
    effective_size,
    macro_mean,
    micro_mean,
    variance_floor,
    wilson,
)
from benchmark.quantiles import t95

T2, T4, T9, T11 = 4.302652729749462, 2.7764451051977934, 2.262157162798205, 2.200985160091639  # t.ppf(0.975, df)

# Ten items of a model in three videos: A holds four items (all right), B three (1 right), C three (2 right).
MODEL = {"A": [1, 1, 1, 1], "B": [1, 0, 0], "C": [1, 1, 0]}
# Humans on the same items: right wherever the model is, and on B's second and C's third as well.
HUMANS = {"A": [1, 1, 1, 1], "B": [1, 1, 0], "C": [1, 1, 1]}


def scored(values: dict[str, list[int]], *, own_clusters: bool = False) -> list[Scored]:
    return [
        Scored(F(value), f"{cluster}{place}" if own_clusters else cluster)
        for cluster, scores in values.items()
        for place, value in enumerate(scores)
    ]


def test_it_computes_the_cr1_variance_of_the_worked_example_exactly():
    """p = 7/10. Residuals y - p, divided by n = 10, summed per video:
    A: 4 x 3/10 = 12/10 -> 12/100;  B: 3/10 - 7/10 - 7/10 = -11/10 -> -11/100;  C: 3/10 + 3/10 - 7/10 -> -1/100.
    Sum of squares (144 + 121 + 1) / 10000 = 266/10000; times G/(G-1) = 3/2: V = 399/10000 (se 0.19975)."""
    mean = micro_mean(scored(MODEL))
    assert (mean.estimate, mean.variance, mean.items, mean.clusters) == (F(7, 10), F(399, 10000), 10, 3)


def test_every_item_its_own_cluster_gives_the_variance_of_a_mean_exactly():
    """G = n = 10: V = 10/9 x sum (y - p)^2 / 100 = 10/9 x 2.1 / 100 = p(1 - p)/(n - 1) = 0.21/9 = 7/300, which is
    the textbook p(1 - p)/n = 21/1000 times n/(n - 1) exactly; the effective size is n - 1 = 9 answers, and Wilson
    takes t on 9 degrees of freedom, 2.262157, in place of 1.959964."""
    mean = micro_mean(scored(MODEL, own_clusters=True))
    assert mean.variance == F(7, 300) == F(21, 1000) * F(10, 9)
    assert effective_size(mean, answers=10) == 9
    assert t95(10) == pytest.approx(T9, rel=1e-12)
    assert accuracy_interval(mean, answers=10) == wilson(F(7, 10), 9, t95(10))


def test_items_that_share_a_video_widen_the_interval():
    """Clustered: n_eff = p(1 - p)/V = 0.21 / 0.0399 = 700/133 = 5.263 answers in G = 3 videos, Wilson at 5.263 with
    t on 2 degrees of freedom, q = 4.302653: q^2/n = 18.51282 / 5.26316 = 3.51744, centre (0.7 + 1.75872) / 4.51744
    = 0.54427, half 4.302653 x sqrt(0.0399 + 18.51282 / 110.80332) / 4.51744 = 4.302653 x 0.454954 / 4.51744
    = 0.43332: [0.1110, 0.9776]. (With z in place of t it would be [0.3062, 0.9250]: three videos cannot say that
    much.) Each item its own cluster: Wilson at 9 with t on 9 degrees of freedom, [0.3422, 0.9128]. The textbook
    Wilson on 10 independent items: [0.3968, 0.8922]."""
    clustered = micro_mean(scored(MODEL))
    assert effective_size(clustered, answers=10) == F(700, 133)
    low, high = accuracy_interval(clustered, answers=10)
    assert (round(low, 4), round(high, 4)) == (0.1110, 0.9776)
    assert tuple(round(bound, 4) for bound in wilson(F(7, 10), F(700, 133))) == (0.3062, 0.9250)
    independent_low, independent_high = accuracy_interval(micro_mean(scored(MODEL, own_clusters=True)), answers=10)
    assert (round(independent_low, 4), round(independent_high, 4)) == (0.3422, 0.9128)
    assert tuple(round(bound, 4) for bound in wilson(F(7, 10), 10)) == (0.3968, 0.8922)
    assert high - low > independent_high - independent_low > 0.8922 - 0.3968


def test_the_paired_gap_of_the_worked_example():
    """d = humans - model: A 0 0 0 0, B 0 1 0, C 0 0 1; mean 2/10. Residuals d - 0.2 over n, per video:
    A: 4 x -0.2 -> -8/100; B: -0.2 + 0.8 - 0.2 -> 4/100; C: 4/100. Sum of squares 96/10000, times 3/2:
    V = 144/10000, se = 0.12 exactly. Three videos: the floor 1/G^2 = 1/9 is above V, so se = 1/3 and
    0.2 +- 4.302653 / 3 = [-1.2342, 1.6342], clipped to [-1, 1]: three videos say nothing of the gap's sign.
    Taken as two separate means the variances add, 111/10000 (humans) + 399/10000 (model): se 0.2258; pairing
    removes what the two sides share per video."""
    gaps = [
        Scored(human.value - model.value, model.cluster)
        for human, model in zip(scored(HUMANS), scored(MODEL), strict=True)
    ]
    gap = micro_mean(gaps)
    assert (gap.estimate, gap.variance) == (F(1, 5), F(144, 10000))
    assert variance_floor(3) == F(1, 9) > gap.variance
    assert difference_interval(gap) == (-1.0, 1.0)
    assert micro_mean(scored(HUMANS)).variance == F(111, 10000)
    assert gap.variance < micro_mean(scored(HUMANS)).variance + micro_mean(scored(MODEL)).variance


def test_the_macro_mean_weighs_categories_the_same_and_centres_each_on_its_own_mean():
    """Temporal: 4 items (1 1 1 0) in videos x x y z; state: 1 item (0) in video z.
    Micro = 3/5. Macro = (3/4 + 0)/2 = 3/8. Macro residuals over (K n_k) = 8: 1/32, 1/32, 1/32, -3/32; state's 0.
    Per video: x 2/32, y 1/32, z -3/32 (video z holds both categories: one cluster). Squares 14/1024, times 3/2:
    V = 21/1024. Micro's: residuals over 5 per video: x 4/25, y 2/25, z (-3 - 3)/25; 56/625 x 3/2 = 84/625."""
    items = [
        Scored(F(1), "x", "temporal"),
        Scored(F(1), "x", "temporal"),
        Scored(F(1), "y", "temporal"),
        Scored(F(0), "z", "temporal"),
        Scored(F(0), "z", "state"),
    ]
    macro, micro = macro_mean(items), micro_mean(items)
    assert (macro.estimate, macro.variance) == (F(3, 8), F(21, 1024))
    assert (micro.estimate, micro.variance) == (F(3, 5), F(84, 625))


def test_one_cluster_gives_no_interval_and_a_perfect_score_still_has_width():
    assert cluster_robust_variance([("a", F(1)), ("a", F(-1))]) is None
    assert accuracy_interval(micro_mean([Scored(F(1), "a"), Scored(F(0), "a")]), answers=2) is None
    # 100% on 6 items in 3 videos: no residual to measure; n_eff is the 3 clusters, Wilson's [3 / (3 + q^2), 1] for 3
    # with q = t on 2 degrees of freedom = 4.302653: [0.1395, 1] (it would be [0.4385, 1] with z).
    perfect = micro_mean([Scored(F(1), cluster) for cluster in "aabbcc"])
    assert perfect.variance == 0 and effective_size(perfect, answers=6) == 3
    low, high = accuracy_interval(perfect, answers=6)
    assert (round(low, 4), high) == (round(3 / (3 + T2 * T2), 4), 1.0) == (0.1395, 1.0)
    assert round(3 / (3 + Z95 * Z95), 4) == 0.4385


@pytest.mark.parametrize("order", [1, -1])
def test_the_bounds_do_not_depend_on_the_order_of_the_items(order):
    items = scored(MODEL)[::order]
    assert accuracy_interval(micro_mean(items), answers=10) == accuracy_interval(micro_mean(scored(MODEL)), answers=10)


def test_the_gap_takes_the_measured_variance_where_it_is_above_the_floor():
    """12 items, each its own video, d = 1 1 1 0 0 0 0 0 0 0 0 0: mean 1/4, V = p(1 - p)/(n - 1) = (3/16)/11 = 3/176
    = 0.017045 over the floor 1/144; 0.25 +- 2.200985 x sqrt(3/176) = 0.25 +- 0.287357: [-0.037357, 0.537357]."""
    gap = micro_mean(Scored(F(value), f"v{n}") for n, value in enumerate([1, 1, 1] + [0] * 9))
    assert gap.variance == F(3, 176) > variance_floor(12)
    low, high = difference_interval(gap)
    assert (round(low, 6), round(high, 6)) == (-0.037357, 0.537357)
    assert high - low == pytest.approx(2 * T11 * (3 / 176) ** 0.5, rel=1e-12)


@pytest.mark.parametrize(
    "difference, clusters, expected",
    [
        # Every difference the same: V = 0, so the floor: d +- t(G - 1) / G, clipped to [-1, 1].
        (F(3, 16), 5, (3 / 16 - T4 / 5, 3 / 16 + T4 / 5)),  # [-0.367789, 0.742789]
        (F(0), 10, (-T9 / 10, T9 / 10)),  # humans and the model both right everywhere: [-0.2262, 0.2262]
        (F(1), 12, (1 - T11 / 12, 1.0)),  # humans right and the model wrong everywhere: [0.8166, 1]
        (F(-1, 3), 3, (-1.0, -1 / 3 + T2 / 3)),  # three videos: [-1.7676, 1.1009], clipped to [-1, 1]
    ],
)
def test_a_gap_whose_differences_are_all_equal_still_has_width(difference, clusters, expected):
    """The reviewer's "+18.8 [18.8, 18.8]": with one difference repeated there is no spread to measure, and the
    interval is the floor's, one discordant answer among the G clusters (se 1/G), never a point."""
    gap = micro_mean(Scored(difference, f"v{n % clusters}") for n in range(2 * clusters))
    assert gap.variance == 0 and gap.clusters == clusters
    low, high = difference_interval(gap)
    assert low == pytest.approx(expected[0], rel=1e-12) and high == pytest.approx(min(1.0, expected[1]), rel=1e-12)
    assert low <= difference <= high and high - low > 0


def test_a_mean_of_one_cluster_or_none_has_no_interval_rather_than_a_point():
    one = micro_mean([Scored(F(1), "v"), Scored(F(1), "v")])
    assert one.variance is None and difference_interval(one) is None and accuracy_interval(one, answers=2) is None
    assert difference_interval(Mean(F(0), None, 1, 1)) is None


def test_the_floor_is_the_cr1_variance_of_one_discordant_answer_among_the_clusters():
    for clusters in (2, 3, 7, 40):
        one_off = micro_mean(Scored(F(int(n == 0)), f"v{n}") for n in range(clusters))
        assert one_off.variance == variance_floor(clusters) == F(1, clusters**2)
