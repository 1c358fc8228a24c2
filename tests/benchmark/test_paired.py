"""Paired comparisons and the judge's checks, on worked examples computed by hand (benchmark.paired), circular
rotations (benchmark.circular) and the judge's reply parsing and prompt (benchmark.description)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from benchmark.circular import circular_correct, rotations
from benchmark.description import JudgePromptError, judge_messages, judge_prompt_of, parse_verdict
from benchmark.paired import binomial_two_sided, cohen_kappa, mcnemar, paired_difference, panel_kappa


def answers(both_right: int, a_only: int, b_only: int, both_wrong: int) -> list[tuple[bool, bool]]:
    return (
        [(True, True)] * both_right
        + [(True, False)] * a_only
        + [(False, True)] * b_only
        + [(False, False)] * both_wrong
    )


def test_mcnemar_is_the_exact_binomial_for_few_discordant_items():
    # b = 7 (A right, B wrong), c = 2: 9 discordant items, fewer than 25, so the exact test.
    # P(X <= 2) for X ~ Binomial(9, 1/2) = (C(9,0) + C(9,1) + C(9,2)) / 2^9 = (1 + 9 + 36) / 512 = 46/512;
    # two-sided: 2 * 46/512 = 92/512 = 0.1796875. The statistic shown is min(b, c) = 2.
    result = mcnemar(answers(30, 7, 2, 11))
    assert (result.a_only, result.b_only, result.discordant, result.items) == (7, 2, 9, 50)
    assert result.method == "exact binomial"
    assert result.statistic == 2.0
    assert result.p_value == 0.1796875
    assert binomial_two_sided(2, 9) == Fraction(92, 512)


def test_mcnemar_is_the_corrected_chi_square_for_many_discordant_items():
    # b = 30, c = 12: 42 discordant. Statistic (|30 - 12| - 1)^2 / 42 = 17^2 / 42 = 289/42 = 6.880952...;
    # p on one degree of freedom = erfc(sqrt(6.880952 / 2)) = 2 * (1 - Phi(2.62316)) = 0.0087119...
    result = mcnemar(answers(100, 30, 12, 8))
    assert result.method == "chi-square (continuity-corrected)"
    assert result.statistic == pytest.approx(6.880952380952381, abs=1e-12)
    assert result.p_value == pytest.approx(0.0087119, abs=1e-6)


def test_mcnemar_with_equal_discordant_counts_finds_no_difference_and_none_without_any():
    # b = c = 3: P(X <= 3) for Binomial(6, 1/2) = (1 + 6 + 15 + 20) / 64 = 42/64; doubled > 1, so p = 1.
    assert mcnemar(answers(5, 3, 3, 0)).p_value == 1.0
    nothing = mcnemar(answers(4, 0, 0, 1))
    assert nothing.method == "" and nothing.p_value is None and nothing.statistic is None


def test_the_paired_difference_has_its_cluster_robust_interval():
    # d = A - B per item: 1, 0, 0, 1 (each item its own cluster): mean 1/2. Variance of the mean s^2 / n with
    # s^2 = 4 * (1/2)^2 / 3 = 1/3, so 1/12 (above the floor 1/G^2 = 1/16); four clusters: t on 3 degrees of freedom,
    # 3.182446 (scipy.stats.t.ppf(0.975, 3)); half width 3.182446 * sqrt(1/12) = 0.918693; [-0.418693, 1.418693]
    # clipped to 1.
    rows = [(True, False, "v1"), (True, True, "v2"), (False, False, "v3"), (True, False, "v4")]
    result = paired_difference(rows)
    assert result.difference == Fraction(1, 2)
    assert (result.accuracy_a, result.accuracy_b) == (Fraction(3, 4), Fraction(1, 4))
    assert result.low == pytest.approx(-0.41869311551853927, abs=1e-12) and result.high == 1.0
    # Two items of one video are one cluster: one cluster left, no interval.
    alone = paired_difference([(True, False, "v1"), (False, False, "v1")])
    assert alone.difference == Fraction(1, 2) and alone.low is None and alone.high is None
    assert paired_difference([]) is None


def test_cohen_kappa_on_a_worked_example():
    # 50 units: both yes 20, judge yes / human no 5, judge no / human yes 10, both no 15.
    # po = 35/50 = 0.7; judge yes 25/50 = 0.5, human yes 30/50 = 0.6; pe = 0.5*0.6 + 0.5*0.4 = 0.5;
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4; SE = sqrt(0.7 * 0.3 / (50 * 0.5^2)) = sqrt(0.0168) = 0.129615;
    # 95%: 0.4 -+ 1.96 * 0.129615 = [0.145960, 0.654040].
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    kappa = cohen_kappa(pairs)
    assert (kappa.units, kappa.observed, kappa.expected) == (50, Fraction(7, 10), Fraction(1, 2))
    assert kappa.kappa == pytest.approx(0.4, abs=1e-12)
    assert kappa.low == pytest.approx(0.14595963, abs=1e-7) and kappa.high == pytest.approx(0.65404037, abs=1e-7)


def test_cohen_kappa_is_undefined_when_both_raters_give_one_label_and_perfect_agreement_is_one():
    same = cohen_kappa([(True, True)] * 4)
    assert same.kappa is None and same.observed == 1
    perfect = cohen_kappa([(True, True), (False, False), (True, True), (False, False)])
    assert perfect.kappa == 1.0 and perfect.low == perfect.high == 1.0
    assert cohen_kappa([]) is None


# The judge (J) and two people (P, Q) on the same 11 descriptions, y = matches the caption.
JUDGE = "YYYYYYYNNNN"
FIRST = "YYYYYYNNNNY"
SECOND = "YYYYYNNNNYY"


def test_a_judge_against_two_people_counts_each_description_once():
    """Per description, the people's share of yes: 1 1 1 1 1 1/2 0 0 0 1/2 1. Agreement with the judge per unit:
    1 1 1 1 1 1/2 0 1 1 1/2 0, po = 8/11. Judge yes 7/11, people yes (5 + 1/2 + 1/2 + 1)/11 = 7/11;
    pe = (7/11)^2 + (4/11)^2 = 65/121; kappa = (88/121 - 65/121) / (56/121) = 23/56 = 0.410714.
    n = 11 descriptions, not 22 verdict pairs: SE = sqrt((8/11)(3/11) / (11 (56/121)^2)) = sqrt(2904/34496)
    = 0.290144; 95%: 0.410714 -+ 1.959964 x 0.290144 = [-0.157958, 0.979387]. Counting the 22 pairs as units gives the
    same kappa here (every description has two people) but SE / sqrt(2), the too-narrow [0.008602, 0.812826]."""
    rows = [(unit, JUDGE[unit] == "Y", person[unit] == "Y") for person in (FIRST, SECOND) for unit in range(11)]
    kappa = panel_kappa(rows)
    assert (kappa.units, kappa.observed, kappa.expected) == (11, Fraction(8, 11), Fraction(65, 121))
    assert kappa.kappa == pytest.approx(23 / 56, abs=1e-15)
    assert kappa.standard_error == pytest.approx((2904 / 34496) ** 0.5, rel=1e-12)
    assert (round(kappa.low, 6), round(kappa.high, 6)) == (-0.157958, 0.979387)
    pairwise = cohen_kappa((judge, person) for _, judge, person in rows)
    assert pairwise.units == 22 and (round(pairwise.low, 6), round(pairwise.high, 6)) == (0.008602, 0.812826)


def test_a_description_with_more_people_weighs_no_more_than_one_with_fewer():
    """Unit a: the judge says yes, three people say no; units b and c: yes and no, each one person agreeing.
    Per unit: po = (0 + 1 + 1)/3 = 2/3, judge yes 2/3, people yes 1/3, pe = 2/9 + 2/9 = 4/9, kappa = (2/9)/(5/9) = 0.4.
    Pairwise, the three dissents on a would weigh three times and the judge's yes on a count three times: po = 2/5,
    judge yes 4/5, people yes 1/5, pe = 8/25, kappa = (2/5 - 8/25) / (17/25) = 2/17."""
    rows = [("a", True, False)] * 3 + [("b", True, True), ("c", False, False)]
    kappa = panel_kappa(rows)
    assert (kappa.units, kappa.observed, kappa.expected) == (3, Fraction(2, 3), Fraction(4, 9))
    assert kappa.kappa == pytest.approx(0.4, abs=1e-15)
    assert cohen_kappa((judge, person) for _, judge, person in rows).kappa == pytest.approx(2 / 17, abs=1e-15)
    assert panel_kappa([]) is None
    with pytest.raises(ValueError, match="unit 'a'"):
        panel_kappa([("a", True, True), ("a", False, True)])


def test_rotations_move_each_option_through_every_place_keeping_the_answer():
    shown = rotations(["a", "b", "c"], 1)
    assert shown == [(["a", "b", "c"], 1), (["b", "c", "a"], 0), (["c", "a", "b"], 2)]
    assert all(options[index] == "b" for options, index in shown)
    assert circular_correct([True, True, True]) and not circular_correct([True, False, True])
    assert not circular_correct([])


@pytest.mark.parametrize(
    "reply, verdict",
    [
        ("### Reasoning\nSame change.\n\n### Verdict\nyes", True),
        ("### Reasoning\nAnother object.\n\n### Verdict\nNo", False),
        ("### Verdict: **Yes**", True),
        ("They describe the same change, so: yes.", True),
        ("I am not sure.", None),
        ("", None),
    ],
)
def test_the_judges_verdict_is_read_after_its_heading_or_at_the_end(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_a_judge_prompt_must_hold_both_placeholders_and_fills_them_once():
    with pytest.raises(JudgePromptError, match="lacks {description}"):
        judge_prompt_of({"user": "Caption: {caption}"})
    with pytest.raises(JudgePromptError, match="system and user texts only"):
        judge_prompt_of({"user": "{caption} {description}", "extra": 1})
    prompt = judge_prompt_of({"user": "C={caption} D={description}"})
    messages = judge_messages("a {description} cup", "moved left", prompt)
    assert messages[1]["content"] == "C=a {description} cup D=moved left"
    assert [m["role"] for m in messages] == ["system", "user"]
