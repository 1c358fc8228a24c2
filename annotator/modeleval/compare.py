"""Models side by side, read from the one store of model answers (ModelEvaluation / ModelItemResult).

`release_compare`: the runs on one release, compared on the same release items (those every chosen run answered),
with each run's own n beside. `model_sources`: each model's answers by pair, for the pages that set models beside
the humans (evaluation reads the humans; annotator does not import evaluation): an endpoint's answer to a pair is
its latest answer (from its most recent run that answered it), an imported results file is a model of its own.
Failed requests are no answer: they count neither as right nor as wrong, and are counted apart.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from annotator.modeleval.services import release_runs, run_labels
from annotator.models import CATEGORY_ABBREVIATIONS, Category, Domain, ModelEvaluation, ModelItemResult, Release

CATEGORIES = [str(c) for c in Category.values]
DOMAINS = [str(d) for d in Domain.values]


def _cell(correct: int, n: int) -> dict:
    return {"correct": correct, "n": n, "accuracy": correct / n if n else None}


def release_compare(*, release: Release, run_ids: list[int] | None = None, split: str = "test") -> dict:
    """The chosen finished runs on `release` (all of them by default) on one split: per category, per domain and
    overall, each run's accuracy on the items every chosen run answered (`common`), and on all it answered (`own`).
    `macro` is the unweighted mean over categories, as the paper's AVG."""
    runs = [run for run in release_runs(release) if run_ids is None or run.pk in run_ids]
    labels = run_labels(runs)
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
    results = results.filter(pair__isnull=False)
    if pair_ids is not None:
        results = results.filter(pair_id__in=list(pair_ids))
    if release_id is not None:
        results = results.filter(evaluation__release_id=release_id)
    return results


def app_sources(pair_ids=None, *, release_id: int | None = None) -> list[ModelSource]:
    """One source per endpoint: its latest answer to each pair (of `pair_ids`, of runs on `release_id`, if given)."""
    results = _scope(
        ModelItemResult.objects.filter(evaluation__endpoint__isnull=False), pair_ids=pair_ids, release_id=release_id
    )
    latest = (
        results.filter(is_correct__isnull=False)
        .order_by("evaluation__endpoint_id", "pair_id", "-evaluation__created", "-evaluation_id", "-pk")
        .distinct("evaluation__endpoint_id", "pair_id")
        .values_list("evaluation__endpoint_id", "evaluation__endpoint__name", "pair_id", "is_correct")
    )
    sources: dict[int, ModelSource] = {}
    for endpoint_id, name, pair_id, is_correct in latest:
        source = sources.get(endpoint_id)
        if source is None:
            source = sources[endpoint_id] = ModelSource(f"endpoint-{endpoint_id}", "app", endpoint_id, name, "")
        source.answers[pair_id] = is_correct
    # Pairs with only failed requests from an endpoint: counted apart, so a page can say how many were left out.
    # order_by(): the default order (pk) would join the SELECT DISTINCT and keep one row per result, not per pair.
    failed = (
        results.filter(is_correct__isnull=True)
        .order_by()
        .values_list("evaluation__endpoint_id", "evaluation__endpoint__name", "pair_id")
        .distinct()
    )
    for endpoint_id, name, pair_id in failed:
        source = sources.get(endpoint_id)
        if source is None:
            source = sources[endpoint_id] = ModelSource(f"endpoint-{endpoint_id}", "app", endpoint_id, name, "")
        if pair_id not in source.answers:
            source.failed += 1
    runs = defaultdict(set)
    for endpoint_id, run_id in results.order_by().values_list("evaluation__endpoint_id", "evaluation_id").distinct():
        runs[endpoint_id].add(run_id)
    for source in sources.values():
        n = len(runs[source.id])
        source.detail = f"app, latest answers of {n} run{'s' if n != 1 else ''}"
    return sorted(sources.values(), key=lambda s: s.name.lower())


def imported_sources(pair_ids=None, *, release_id: int | None = None, study_id: int | None = None) -> list[ModelSource]:
    """One source per imported results file, its answers keyed by pair: the files on `release_id`, or (before
    releases) those imported into the study `study_id`; all of them when neither is given."""
    runs = ModelEvaluation.objects.filter(source=ModelEvaluation.Source.IMPORT, endpoint__isnull=True)
    if release_id is not None or study_id is not None:
        runs = runs.filter(release_id=release_id) if release_id is not None else runs.filter(study_id=study_id)
    results = _scope(ModelItemResult.objects.filter(evaluation__in=runs), pair_ids=pair_ids, release_id=None)
    sources: dict[int, ModelSource] = {}
    for run in runs.select_related("release").order_by("created", "pk"):
        where = f"release {run.release.name}" if run.release_id else f"study {run.study_id} (before releases)"
        detail = f"imported file, {run.items} items of {where}"
        sources[run.pk] = ModelSource(f"import-{run.pk}", "imported", run.pk, run.label, detail)
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
