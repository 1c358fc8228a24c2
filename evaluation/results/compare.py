"""Models side by side, read from the one store of model answers (ModelEvaluation / ModelItemResult).

`release_compare`: the runs on one release, compared on the same release items (those every chosen run answered),
with each run's own n beside. `model_sources`: each model's answers by pair, for the pages that set models beside
the humans (evaluation reads the humans; annotator does not import evaluation): an endpoint's answer to a pair is
its latest answer (from its most recent run that answered it), an imported results file is a model of its own.
Failed requests are no answer: they count neither as right nor as wrong, and are counted apart.
`paired_compare`: two sides (two runs, or a run and the humans) on the items both answered, with McNemar's test
and the paired difference in accuracy, per category.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction

from annotator.models import CATEGORY_ABBREVIATIONS, Category, Domain, Release
from benchmark.paired import mcnemar
from evaluation.models import Assignment, ModelEvaluation, ModelItemResult
from evaluation.runs.naming import run_name, run_names
from evaluation.runs.selectors import release_runs
from evaluation.studies.accuracy import accuracy_figure, human_items

CATEGORIES = [str(c) for c in Category.values]
DOMAINS = [str(d) for d in Domain.values]


def _cell(correct: int, n: int) -> dict:
    return {"correct": correct, "n": n, "accuracy": correct / n if n else None}


def release_compare(*, release: Release, run_ids: list[int] | None = None, split: str = "test") -> dict:
    """The chosen finished runs on `release` (all of them by default) on one split: per category, per domain and
    overall, each run's accuracy on the items every chosen run answered (`common`), and on all it answered (`own`).
    `macro` is the unweighted mean over categories, as the paper's AVG. By default the multiple-choice runs only (a
    description run's judged descriptions are another task): one is in the table when chosen."""
    runs = [
        run
        for run in release_runs(release)
        if (run.pk in run_ids if run_ids is not None else run.task != "description")
    ]
    labels = run_names(runs)
    answers: dict[int, dict[int, tuple[bool, str, str]]] = {run.pk: {} for run in runs}
    failed: dict[int, int] = defaultdict(int)
    rows = (
        ModelItemResult.objects.filter(evaluation__in=runs, release_item__split=split)
        .order_by("pk")
        .values_list("evaluation_id", "release_item_id", "is_correct", "release_item__category", "release_item__domain")
    )
    for run_id, item, correct, category, domain in rows:
        if correct is None:
            failed[run_id] += 1
        else:
            answers[run_id][item] = (correct, category, domain)
    common = set.intersection(*(set(a) for a in answers.values())) if runs else set()
    table = []
    for run in runs:
        mine = answers[run.pk]

        def group(items, position: int, names, mine=mine) -> dict:
            out = {}
            for name in names:
                flags = [mine[i][0] for i in items if mine[i][position] == name]
                if flags:
                    out[name] = _cell(sum(flags), len(flags))
            return out

        categories = group(common, 1, CATEGORIES)
        accuracies = [cell["accuracy"] for cell in categories.values()]
        table.append(
            {
                "run": run,
                "label": labels[run.pk],
                "categories": categories,
                "domains": group(common, 2, DOMAINS),
                "micro": _cell(sum(mine[i][0] for i in common), len(common)),
                "macro": sum(accuracies) / len(accuracies) if accuracies else None,
                "own": _cell(sum(flag for flag, _, _ in mine.values()), len(mine)),
                "failed": failed[run.pk],
            }
        )
    present = {name for row in table for name in row["categories"]}
    return {
        "release": release,
        "split": split,
        "runs": table,
        "common": len(common),
        "categories": [(c, CATEGORY_ABBREVIATIONS[c]) for c in CATEGORIES if c in present],
        "domains": [d for d in DOMAINS if any(d in row["domains"] for row in table)],
    }


@dataclass
class ModelSource:
    """One model's answers by pair id (answered items only) and how many of its requests failed."""

    key: str  # "endpoint-<id>" or "import-<run id>": what the pages' model filter names
    kind: str  # "app" or "imported"
    id: int
    name: str
    detail: str
    answers: dict[int, bool] = field(default_factory=dict)
    failed: int = 0


def _scope(results, *, pair_ids, release_id):
    # Multiple choice only: a description run's judged descriptions answer no question (issue 28).
    results = results.filter(pair__isnull=False, evaluation__task="multiple_choice")
    if pair_ids is not None:
        results = results.filter(pair_id__in=list(pair_ids))
    if release_id is not None:
        results = results.filter(evaluation__release_id=release_id)
    return results


def app_sources(pair_ids=None, *, release_id: int | None = None) -> list[ModelSource]:
    """One source per endpoint and configuration (the runs with one name, evaluation.runs.naming: the same strategy,
    task, prompt, settings and label are repeats of one measurement): its latest answer to each pair (of `pair_ids`,
    of runs on `release_id`, if given). Two strategies of one model are two sources. The key is `endpoint-<id>` where
    the endpoint has one configuration here, else `endpoint-<id>-<8 hex digits of the name's sha256>`."""
    results = _scope(
        ModelItemResult.objects.filter(evaluation__endpoint__isnull=False), pair_ids=pair_ids, release_id=release_id
    )
    run_ids = results.order_by().values_list("evaluation_id", flat=True).distinct()
    runs = ModelEvaluation.objects.filter(pk__in=run_ids).select_related("endpoint", "judge")
    group_of = {run.pk: (run.endpoint_id, run_name(run)) for run in runs}
    runs_of: dict[tuple[int, str], int] = defaultdict(int)
    for group in group_of.values():
        runs_of[group] += 1
    configurations: dict[int, int] = defaultdict(int)
    for endpoint_id, _ in runs_of:
        configurations[endpoint_id] += 1
    sources: dict[tuple[int, str], ModelSource] = {}
    for group, n in runs_of.items():
        endpoint_id, name = group
        key = f"endpoint-{endpoint_id}"
        if configurations[endpoint_id] > 1:
            key += "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
        detail = f"app, latest answers of {n} run{'s' if n != 1 else ''}"
        sources[group] = ModelSource(key, "app", endpoint_id, name, detail)
    # Newest first: the first answer met for a pair is the latest; a failed request is no answer, so an earlier
    # answer stands, and a pair with only failed requests is counted apart.
    failed: dict[tuple[int, str], set[int]] = defaultdict(set)
    rows = results.order_by("-evaluation__created", "-evaluation_id", "-pk").values_list(
        "evaluation_id", "pair_id", "is_correct"
    )
    for run_id, pair_id, is_correct in rows:
        group = group_of[run_id]
        if is_correct is None:
            failed[group].add(pair_id)
        else:
            sources[group].answers.setdefault(pair_id, is_correct)
    for group, source in sources.items():
        source.failed = len(failed[group] - source.answers.keys())
    return sorted(sources.values(), key=lambda s: (s.name.lower(), s.key))


def imported_sources(pair_ids=None, *, release_id: int | None = None, study_id: int | None = None) -> list[ModelSource]:
    """One source per imported results file, its answers keyed by pair: the files on `release_id`, or (before
    releases) those imported into the study `study_id`; all of them when neither is given."""
    runs = ModelEvaluation.objects.filter(source=ModelEvaluation.Source.IMPORT, endpoint__isnull=True)
    if release_id is not None or study_id is not None:
        runs = runs.filter(release_id=release_id) if release_id is not None else runs.filter(study_id=study_id)
    results = _scope(ModelItemResult.objects.filter(evaluation__in=runs), pair_ids=pair_ids, release_id=None)
    sources: dict[int, ModelSource] = {}
    ordered = list(runs.select_related("release", "endpoint", "judge").order_by("created", "pk"))
    names = run_names(ordered)
    for run in ordered:
        where = f"release {run.release.name}" if run.release_id else f"study {run.study_id} (before releases)"
        detail = f"imported file, {run.items} items of {where}"
        sources[run.pk] = ModelSource(f"import-{run.pk}", "imported", run.pk, names[run.pk], detail)
    for run_id, pair_id, is_correct in results.order_by("evaluation_id", "pk").values_list(
        "evaluation_id", "pair_id", "is_correct"
    ):
        if is_correct is None:
            sources[run_id].failed += 1
        else:
            sources[run_id].answers[pair_id] = is_correct
    return [source for source in sources.values() if source.answers or source.failed]


def model_sources(pair_ids=None, *, release_id: int | None = None, study_id: int | None = None) -> list[ModelSource]:
    """Every model source: app endpoints first (by name), then imported files (oldest first)."""
    return app_sources(pair_ids, release_id=release_id) + imported_sources(
        pair_ids, release_id=release_id, study_id=study_id
    )


# --- Two sides paired on the same items (issue 28) ---------------------------------------------------------------

# An item on one side: (score, category, cluster, answers), keyed by the release item's id. A run's score is 0 or 1,
# from one answer; the humans' is the share of the item's raters who were right (evaluation.studies.accuracy: the one
# rule), from as many answers as raters.
Side = dict[int, tuple[Fraction, str, str, int]]


def run_side(run: ModelEvaluation, split: str) -> Side:
    """A run's answered items of one split of its release (a failed request is no answer: not on the side)."""
    rows = (
        ModelItemResult.objects.filter(evaluation=run, release_item__split=split, is_correct__isnull=False)
        .order_by("pk")
        .values_list("release_item_id", "is_correct", "release_item__category", "release_item__cluster")
    )
    return {item: (Fraction(int(correct)), category, cluster, 1) for item, correct, category, cluster in rows}


def human_release_side(release: Release, split: str) -> Side:
    """The humans on `split` of `release`: each answered scored item's human score (the one rule)."""
    answers = Assignment.objects.filter(
        item__study__release=release, item__release_item__release=release, item__release_item__split=split
    )
    items = human_items(answers, key="release_item")
    return {key: (item.score, item.category, item.cluster, item.answers) for key, item in items.items()}


def _paired_row(name: str, common: list[tuple]) -> dict:
    """(item, score A, answers A, score B, answers B, category, cluster) of the items both sides answered. McNemar's
    test needs one right or wrong answer per item on each side: with the humans (a share of raters) on a side it is
    not computed, and the paired difference with its cluster-robust interval stands alone."""
    binary = all(m == n == 1 for _, _, m, _, n, _, _ in common)  # one answer per item on each side
    test = mcnemar((a == 1, b == 1) for _, a, _, b, _, _, _ in common) if binary else None
    difference = accuracy_figure(((i, a - b, m + n, 0, c, g) for i, a, m, b, n, c, g in common), gap=True)
    return {
        "name": name,
        "n": len(common),
        "clusters": difference["clusters"],
        "a": accuracy_figure((i, a, m, int(a == 1), c, g) for i, a, m, _, _, c, g in common),
        "b": accuracy_figure((i, b, n, int(b == 1), c, g) for i, _, _, b, n, c, g in common),
        "a_only": test.a_only if test else None,
        "b_only": test.b_only if test else None,
        "method": test.method if test else "not for a share of raters",
        "statistic": test.statistic if test else None,
        "p_value": test.p_value if test else None,
        "difference": difference["accuracy"],
        "low": difference["low"],
        "high": difference["high"],
    }


def paired_compare(side_a: Side, side_b: Side) -> dict:
    """Two sides on the items both answered: per category and overall, each side's accuracy, McNemar's test on the
    discordant items (exact binomial for few, benchmark.paired) and the paired difference A - B with its
    cluster-robust interval. `only_a` / `only_b`: items one side answered and the other did not (left out)."""
    common = sorted(set(side_a) & set(side_b))
    by_category: dict[str, list] = defaultdict(list)
    every = []
    for item in common:
        score_a, category, cluster, answers_a = side_a[item]
        score_b, _, _, answers_b = side_b[item]
        row = (item, score_a, answers_a, score_b, answers_b, category, cluster)
        every.append(row)
        by_category[category].append(row)
    return {
        "overall": _paired_row("all", every),
        "categories": [_paired_row(c, by_category[c]) for c in CATEGORIES if c in by_category],
        "common": len(common),
        "only_a": len(set(side_a) - set(side_b)),
        "only_b": len(set(side_b) - set(side_a)),
    }


HUMANS = "humans"
HUMANS_LABEL = "humans (study answers: each item the share of its raters who were right)"


def side_choices(runs, labels: dict[int, str]) -> list[tuple[str, str]]:
    """What can stand on either side of a paired comparison on a release: each finished run, then the humans."""

    return [(str(run.pk), labels[run.pk]) for run in runs] + [(HUMANS, HUMANS_LABEL)]


def side_of(release: Release, choice: str, split: str) -> Side:
    """The side named by a choice of `side_choices`."""
    if choice == HUMANS:
        return human_release_side(release, split)
    return run_side(ModelEvaluation.objects.get(pk=int(choice), release=release), split)
