"""Human accuracy, one definition for every page, download and API answer: an item scores the share of its raters who
answered it right (benchmark.report.human_item_score: a 1-1 tie is 1/2), a figure is the mean of its items' scores
(micro) or of its categories' means (macro), and its 95% interval is cluster-robust, items that share a video or a
source image forming one cluster (benchmark.report.score_cell, as the release report computes its cells).

The study's dashboard, its JSON summary and the API's study results, the models beside the humans, the paired
comparison on a release and the release report all read the humans through `human_items` and `accuracy_figure`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from benchmark.report import Cell, human_item_score, score_cell
from evaluation.models import Assignment, StudyItem

HUMAN_RULE = (
    "Human accuracy: each item scores the share of its raters who answered it right (a 1-1 tie scores 1/2); micro is "
    "the mean over items, macro the mean of the categories' means; 95% intervals are cluster-robust (items sharing a "
    "video or a source image are one cluster)."
)


@dataclass(frozen=True)
class HumanItem:
    """One item's human score and what stands behind it."""

    score: Fraction
    answers: int
    correct: int
    raters: frozenset[str]
    category: str
    domain: str
    cluster: str


def item_cluster(release_cluster: str | None, video_id: int | None, pair_id: int) -> str:
    """The cluster of a study item: its release item's (the export's rule: a video or a source image), else, for a
    study drawn before releases, its pair's video, else the pair alone."""
    if release_cluster:
        return release_cluster
    return f"video:{video_id}" if video_id else f"pair:{pair_id}"


def human_items(answers, *, key: str = "pair") -> dict[int, HumanItem]:
    """The scored, answered assignments of `answers` (an Assignment queryset) as one HumanItem per item, keyed by
    the item's pair id (`key="pair"`) or its release item's id (`key="release_item"`); practice items and attention
    checks never count."""
    rows = (
        answers.filter(answered_at__isnull=False, item__kind=StudyItem.Kind.SCORED)
        .order_by("pk")
        .values_list(
            "item__pair_id",
            "item__release_item_id",
            "participant_id",
            "correct",
            "item__category",
            "item__domain",
            "item__release_item__cluster",
            "item__pair__video_id",
        )
    )
    marks: dict[int, list] = {}
    for pair_id, release_item_id, rater, correct, category, domain, cluster, video_id in rows:
        item = pair_id if key == "pair" else release_item_id
        entry = marks.setdefault(item, [[], [], category, domain, item_cluster(cluster, video_id, pair_id)])
        entry[0].append(bool(correct))
        entry[1].append(str(rater))
    return {
        item: HumanItem(
            score=human_item_score(right),
            answers=len(right),
            correct=sum(right),
            raters=frozenset(raters),
            category=category,
            domain=domain,
            cluster=cluster,
        )
        for item, (right, raters, category, domain, cluster) in marks.items()
    }


def study_answers(study):
    return Assignment.objects.filter(item__study=study)


def accuracy_figure(entries: Iterable[tuple], *, macro: bool = False, gap: bool = False) -> dict:
    """A figure as the pages and the JSON show it, from (item_key, score, answers, correct, category, cluster)
    entries: the accuracy (or, with `gap`, the difference) with its cluster-robust 95% interval, the items, clusters
    and answers behind it, and the correct answers among them."""
    entries = list(entries)
    cell = score_cell(
        (
            (key, score, answers, frozenset(), category, cluster)
            for key, score, answers, _, category, cluster in entries
        ),
        macro=macro,
        gap=gap,
    )
    return cell_figure(cell, correct=sum(correct for _, _, _, correct, _, _ in entries))


def cell_figure(cell: Cell | None, *, correct: int | None = None) -> dict:
    """A report cell as a plain dict: accuracy, low, high, items, clusters, answers (`n`: the answers), correct."""
    if cell is None:
        return {"accuracy": None, "low": None, "high": None, "items": 0, "clusters": 0, "n": 0, "correct": 0}
    return {
        "accuracy": float(cell.estimate),
        "low": cell.low,
        "high": cell.high,
        "items": cell.items,
        "clusters": cell.clusters,
        "n": cell.answers,
        "correct": correct,
    }


def human_entries(items: dict[int, HumanItem], keys: Iterable[int] | None = None) -> list[tuple]:
    """accuracy_figure's entries for the humans on `keys` (every item when None)."""
    chosen = items if keys is None else [key for key in keys if key in items]
    return [
        (key, items[key].score, items[key].answers, items[key].correct, items[key].category, items[key].cluster)
        for key in chosen
    ]
