"""The release report: figures per category, domain and overall, gaps on the items both sides answered, clear errors
for input that does not hold together, and files whose bytes depend on the input only (not on its order)."""

from __future__ import annotations

import csv
import io
import json
import random
from fractions import Fraction as F

import pytest

from benchmark.report import (
    ReportInputError,
    compute_report,
    decimal,
    latex_escape,
    percent,
    report_csv,
    report_json,
    report_latex,
    report_markdown,
)
from benchmark.taxonomy import CATEGORIES

RELEASE = {"release": "v1", "release_hash": "c0ffee" + "0" * 58, "split": "test"}


def demo_input(seed: int = 23):
    """60 items over all categories and three domains, in 20 videos; three raters on some items, two models."""
    chance = random.Random(seed)
    domains = ("natural", "gaming", "aerial")
    items = [(f"item{n:02d}", CATEGORIES[n % 10], domains[n % 3], f"v{n // 3}") for n in range(60)]
    humans = [
        (item_id, f"rater{rater}", chance.random() < 0.9)
        for item_id, *_ in items[::2]
        for rater in range(1 + chance.randrange(3))
    ]
    models = {
        "gpt-4o": [(item_id, chance.random() < 0.75) for item_id, *_ in items],
        "qwen_2.5 & co": [(item_id, chance.random() < 0.6) for item_id, *_ in items[5:]],
    }
    return items, humans, models


def files(items, humans, models) -> list[bytes]:
    report = compute_report(**RELEASE, items=items, humans=humans, models=models)
    return [render(report) for render in (report_csv, report_json, report_markdown, report_latex)]


def test_it_scores_humans_per_item_as_the_mean_of_their_raters_and_counts_raters():
    items = [("a", "temporal", "natural", "v1"), ("b", "temporal", "natural", "v2"), ("c", "state", "gaming", "v2")]
    humans = [("a", "r1", True), ("a", "r2", True), ("a", "r3", False), ("b", "r1", True), ("c", "r2", False)]
    report = compute_report(**RELEASE, items=items, humans=humans, models={})
    temporal = report.humans.categories["temporal"]
    # (2/3 + 1) / 2 = 5/6: each item weighs the same, not each answer (which would give 3/4).
    assert (temporal.estimate, temporal.items, temporal.clusters, temporal.answers, temporal.raters) == (
        F(5, 6),
        2,
        2,
        4,
        3,
    )
    assert report.humans.micro.estimate == F(5, 9) and report.humans.micro.raters == 3
    assert report.humans.macro.estimate == F(5, 12)  # (5/6 + 0) / 2
    assert report.humans.categories["state"].low is None  # one cluster: no interval
    assert report.humans.categories["attribute"] is None and report.humans.domains["medical"] is None


def test_a_gap_counts_only_the_items_both_sides_answered():
    items = [(f"i{n}", "temporal", "natural", f"v{n % 3}") for n in range(6)]
    humans = [(f"i{n}", "r", True) for n in range(4)]  # i4, i5: no human answer
    models = {"m": [(f"i{n}", n % 2 == 0) for n in range(2, 6)]}  # i0, i1: no model answer
    report = compute_report(**RELEASE, items=items, humans=humans, models=models)
    (gap,) = report.gaps
    # Paired: i2 (1 - 1) and i3 (1 - 0): 1/2. The unpaired difference would be 1 - 2/4 = 1/2 on other items.
    assert (gap.label, gap.micro.estimate, gap.micro.items, gap.micro.answers) == ("Humans - m", F(1, 2), 2, 4)
    assert report.models[0].micro.items == 4 and report.humans.micro.items == 4


def test_sharing_videos_widens_the_reported_interval_and_own_clusters_do_not():
    scores = [1, 1, 1, 1, 1, 0, 0, 1, 1, 0]  # the worked example of test_intervals: 7/10 in videos A A A A B B B C C C
    videos = "AAAABBBCCC"
    clustered = [(f"i{n}", "temporal", "natural", videos[n]) for n in range(10)]
    alone = [(f"i{n}", "temporal", "natural", f"own{n}") for n in range(10)]
    model = {"m": [(f"i{n}", bool(score)) for n, score in enumerate(scores)]}
    wide = compute_report(**RELEASE, items=clustered, humans=[], models=model).models[0].micro
    narrow = compute_report(**RELEASE, items=alone, humans=[], models=model).models[0].micro
    # Worked in test_intervals (Wilson at the effective size with t on G - 1 degrees of freedom), checked with
    # scipy.stats.t.ppf: t(2) = 4.302653 for the three videos, t(9) = 2.262157 for the ten items alone.
    assert (decimal(wide.low, 4), decimal(wide.high, 4), wide.clusters) == ("0.1110", "0.9776", 3)
    assert (decimal(narrow.low, 4), decimal(narrow.high, 4), narrow.clusters) == ("0.3422", "0.9128", 10)


def test_a_gap_whose_items_all_differ_alike_is_printed_with_width():
    """Five items in five videos, each answered by three raters of whom two are right (2/3) and by the model, right:
    every difference is -1/3, so V = 0. The interval is the floor's, -1/3 +- t(4) / 5 = -0.333333 +- 2.776445 / 5
    = [-0.888622, 0.221956] (t(4) = scipy.stats.t.ppf(0.975, 4)), not the point "-33.3 [-33.3, -33.3]"."""
    items = [(f"i{n}", "temporal", "natural", f"v{n}") for n in range(5)]
    humans = [(f"i{n}", rater, rater != "r3") for n in range(5) for rater in ("r1", "r2", "r3")]
    models = {"m": [(f"i{n}", True) for n in range(5)]}
    report = compute_report(**RELEASE, items=items, humans=humans, models=models)
    cell = report.gaps[0].categories["temporal"]
    assert (cell.estimate, decimal(cell.low, 6), decimal(cell.high, 6)) == (F(-1, 3), "-0.888622", "0.221956")
    assert "-33.3 [-88.9, 22.2]" in report_markdown(report).decode()


def test_the_files_are_the_same_bytes_twice_and_whatever_the_order_of_the_input():
    items, humans, models = demo_input()
    first = files(items, humans, models)
    chance = random.Random(7)
    shuffled_items, shuffled_humans = items[:], humans[:]
    chance.shuffle(shuffled_items)
    chance.shuffle(shuffled_humans)
    shuffled_models = {label: chance.sample(answers, len(answers)) for label, answers in reversed(models.items())}
    assert files(items, humans, models) == first
    assert files(shuffled_items, shuffled_humans, shuffled_models) == first
    # ... and another input gives other bytes: the test could fail.
    assert files(*demo_input(seed=24)) != first


def test_the_csv_and_the_json_hold_every_figure_with_fixed_decimals():
    items, humans, models = demo_input()
    report = compute_report(**RELEASE, items=items, humans=humans, models=models)
    rows = list(csv.DictReader(io.StringIO(report_csv(report).decode())))
    micro = {row["row"]: row for row in rows if row["key"] == "micro"}
    assert set(micro) == {"Humans", "gpt-4o", "qwen_2.5 & co", "Humans - gpt-4o", "Humans - qwen_2.5 & co"}
    assert micro["gpt-4o"]["estimate"] == decimal(report.models[0].micro.estimate)
    assert all(len(row["estimate"].split(".")[1]) == 6 for row in rows)
    document = json.loads(report_json(report))
    assert document["release"] == "v1" and document["humans"]["micro"]["raters"] == 3
    assert document["models"][0]["micro"]["exact"] == "{0.numerator}/{0.denominator}".format(
        report.models[0].micro.estimate
    )
    assert list(document) == sorted(document)


def test_the_markdown_is_the_papers_table_with_abbreviations_and_intervals():
    items, humans, models = demo_input()
    report = compute_report(**RELEASE, items=items, humans=humans, models=models)
    text = report_markdown(report).decode()
    assert "| | AT | ST | EM | TM | SP | EX | QN | QL | VP | AC | Micro | Macro |" in text
    humans_micro = report.humans.micro
    expected = f"{percent(humans_micro.estimate)} [{percent(humans_micro.low)}, {percent(humans_micro.high)}]"
    assert expected in text.split("| Humans |")[1].splitlines()[0]
    assert "qwen_2.5 & co" in text and f"{humans_micro.raters} raters" in text


def test_percentages_round_halves_up():
    assert [percent(F(x, 1000)) for x in (955, 9555, 9554, 1)] == ["95.5", "955.5", "955.4", "0.1"]
    assert percent(F(1, 2000)) == "0.1" and percent(F(-1, 2000)) == "0.0" and decimal(F(-3, 2), 0) == "-1"


def test_latex_is_a_booktabs_tabular_with_its_text_escaped():
    items, humans, _ = demo_input()
    label = r"gpt_4o & co 100% {#1} $x^2~\ "
    report = compute_report(**RELEASE, items=items, humans=humans, models={label: [(items[0][0], True)]})
    text = report_latex(report).decode()
    escaped = r"gpt\_4o \& co 100\% \{\#1\} \$x\textasciicircum{}2\textasciitilde{}\textbackslash{} "
    assert latex_escape(label) == escaped
    assert f"\n{escaped} &" in text and label not in text
    assert text.index(r"\toprule") < text.index(r"\midrule") < text.index(r"\bottomrule")
    assert text.count(r"\begin{tabular}{l" + "c" * 12 + "}") == 1 and text.endswith("\\end{tabular}\n")
    for line in text.splitlines():
        if line.endswith(r"\\") and "multicolumn" not in line:
            assert line.count(" & ") == 12, line


@pytest.mark.parametrize(
    "items, humans, models, message",
    [
        ([("a", "colour", "natural", "v")], [], {}, "items, entry 1 ('a'): unknown category 'colour'"),
        ([("a", "state", "natural", "v"), ("a", "state", "natural", "v")], [], {}, "entry 2 ('a'): the item id"),
        ([("a", "state", "natural", "")], [], {}, "entry 1 ('a'): the cluster must be a non-empty text"),
        ([("a", "state", "natural", "v")], [("b", "r", True)], {}, "humans, answer 1 (item 'b', rater 'r'): no such"),
        ([("a", "state", "natural", "v")], [("a", "r", True), ("a", "r", False)], {}, "answer 2 (item 'a', rater"),
        ([("a", "state", "natural", "v")], [("a", "r", "yes")], {}, "is_correct must be true or false, got 'yes'"),
        ([("a", "state", "natural", "v")], [], {"m": [("a", True), ("a", True)]}, "model 'm', answer 2 (item 'a')"),
        ([("a", "state", "natural", "v")], [], {"m": [("z", True)]}, "no such item in release v1 (test)"),
    ],
)
def test_input_that_does_not_hold_together_is_refused_saying_where(items, humans, models, message):
    with pytest.raises(ReportInputError) as raised:
        compute_report(**RELEASE, items=items, humans=humans, models=models)
    assert message in str(raised.value)
