"""Humans beside the models: each model's answers (evaluation.results.compare, the one store) set against the
humans' answers on the same items.

A model is a registered endpoint evaluated in the app or an imported results file. Both are matched to the
humans by pair within the study's release (a study item is its pair, and a result names its release item and
pair); before releases, by pair across runs. An endpoint's answer to a pair is its latest answer, as for "models
correct k of n" on the pair; failed requests are no answer, so they count neither as right nor as wrong.
"""

from __future__ import annotations

from fractions import Fraction

from annotator.models import CATEGORY_ABBREVIATIONS, Category, Domain, Pair
from evaluation.models import Assignment, Study
from evaluation.results.compare import ModelSource, app_sources, imported_sources, model_sources
from evaluation.studies.accuracy import HumanItem, accuracy_figure, human_entries, human_items, item_cluster

CATEGORIES = [str(c) for c in Category.values]
DOMAINS = [str(d) for d in Domain.values]


def study_sources(study: Study, pair_ids) -> list[ModelSource]:
    """The models to set beside a study's humans: on a study of a release, the runs on that release; before
    releases, every endpoint's latest answers and the files imported into the study."""
    release_id = getattr(study, "release_id", None)
    if release_id is not None:
        return model_sources(pair_ids, release_id=release_id)
    return app_sources(pair_ids) + imported_sources(pair_ids, study_id=study.pk)


def human_answers(study: Study | None = None) -> dict[int, HumanItem]:
    """The humans' scored answers by pair id, one HumanItem per pair (evaluation.studies.accuracy: the one rule)."""
    answers = Assignment.objects.all() if study is None else Assignment.objects.filter(item__study=study)
    return human_items(answers)


def strata_of(study: Study | None, pair_ids) -> dict[int, tuple[str, str, str]]:
    """Category, domain and cluster by pair: a study's frozen strata, else the pairs' own."""
    if study is not None:
        items = study.items.scored().values_list(
            "pair_id", "category", "domain", "release_item__cluster", "pair__video_id"
        )
        return {p: (category, domain, item_cluster(cluster, video, p)) for p, category, domain, cluster, video in items}
    pairs = Pair.objects.filter(pk__in=list(pair_ids)).values_list("pk", "category", "domain", "video_id")
    return {pk: (category, domain, item_cluster(None, video, pk)) for pk, category, domain, video in pairs}


def _model_entries(pairs, answers, strata) -> list[tuple]:
    return [(p, Fraction(int(bool(answers[p]))), 1, int(bool(answers[p])), strata[p][0], strata[p][2]) for p in pairs]


def _gap_entries(pairs, answers, humans, strata) -> list[tuple]:
    return [
        (p, humans[p].score - int(bool(answers[p])), humans[p].answers + 1, 0, strata[p][0], strata[p][2])
        for p in pairs
    ]


def _sides(pairs, answers, humans, strata, *, macro=False) -> dict:
    """The model on every item it answered, the model and the humans on the items both answered, and the gap
    (humans minus model) on those, each with its cluster-robust interval."""
    same = [p for p in pairs if p in humans]
    gap = accuracy_figure(_gap_entries(same, answers, humans, strata), macro=macro, gap=True)
    return {
        "model_all": accuracy_figure(_model_entries(pairs, answers, strata), macro=macro),
        "model": accuracy_figure(_model_entries(same, answers, strata), macro=macro),
        "human": accuracy_figure(human_entries(humans, same), macro=macro),
        "gap": gap,
        "difference": gap["accuracy"],
    }


def _group(names, key_of, pairs, answers, humans, strata, *, abbr=False) -> dict[str, dict]:
    out = {}
    for name in names:
        mine = [p for p in pairs if key_of(p) == name]
        if not mine:
            continue
        out[name] = _sides(mine, answers, humans, strata)
        if abbr:
            out[name]["abbr"] = CATEGORY_ABBREVIATIONS[name]
    return out


def compare(sources: list[ModelSource], humans: dict[int, HumanItem], strata: dict[int, tuple[str, str, str]]) -> list:
    """Per model, per category and per domain: the model on every item it answered (`model_all`), and the model
    and the humans on the items both answered (`model`, `human`, `gap` = humans - model), each with its
    cluster-robust 95% interval; AVG is the macro mean over categories, as in the paper. The humans' score of an
    item is the share of its raters who were right (evaluation.studies.accuracy)."""
    out = []
    for source in sources:
        pairs = sorted(p for p in source.answers if p in strata)
        answers = source.answers
        categories = _group(CATEGORIES, lambda p: strata[p][0], pairs, answers, humans, strata, abbr=True)
        domains = _group(DOMAINS, lambda p: strata[p][1], pairs, answers, humans, strata)
        same = [p for p in pairs if p in humans]
        average = _sides(pairs, answers, humans, strata, macro=True)
        out.append(
            {
                "key": source.key,
                "kind": source.kind,
                "id": source.id,
                "name": source.name,
                "detail": source.detail,
                "matched": len(pairs),
                "same_items": len(same),
                "failed": source.failed,
                "categories": categories,
                "domains": domains,
                "model_all": accuracy_figure(_model_entries(pairs, answers, strata)),
                "model_all_avg": average["model_all"],
                "model_avg": average["model"],
                "human_avg": average["human"],
                "gap_avg": average["gap"],
                "difference": average["difference"] if same else None,
            }
        )
    return out


def study_models(study: Study) -> list[dict]:
    """The study's imported results files and every endpoint that answered its sampled pairs, side by side."""
    strata = strata_of(study, None)
    return compare(study_sources(study, strata.keys()), human_answers(study), strata)


def all_sources(study: Study | None = None) -> tuple[list[ModelSource], dict[int, tuple[str, str]]]:
    """Every model source (app endpoints first, then imported files) and the strata of the pairs they cover."""
    if study is not None:
        strata = strata_of(study, None)
        return study_sources(study, strata.keys()), strata
    sources = model_sources()
    pair_ids = set()
    for source in sources:
        pair_ids.update(source.answers)
    return sources, strata_of(None, pair_ids)


def models_overview(study: Study | None = None) -> dict:
    """What /models/compare/ shows: every model beside the humans on the same items (one study's, or all)."""
    sources, strata = all_sources(study)
    return {"models": compare(sources, human_answers(study), strata)}


def humans_right(item: HumanItem) -> bool:
    """The humans got an item right when its score (the share of its raters who were right) is above one half."""
    return item.score > Fraction(1, 2)


def human_right_model_missed(
    *,
    study: Study | None = None,
    category: str = "",
    domain: str = "",
    model_key: str = "",
) -> tuple[list[dict], list[ModelSource]]:
    """Items the humans got right (a majority of their answers) and the models missed: with `model_key`, that
    model answered wrong; without, every model that answered it did (and at least one did). Oldest pair first."""
    sources, strata = all_sources(study)
    humans = human_answers(study)
    chosen = [s for s in sources if s.key == model_key] if model_key else sources
    rows = []
    for pair_id in sorted(strata):
        human = humans.get(pair_id)
        if not human or not humans_right(human):
            continue
        pair_category, pair_domain, _ = strata[pair_id]
        if (category and pair_category != category) or (domain and pair_domain != domain):
            continue
        answered = [s for s in chosen if pair_id in s.answers]
        if not answered or any(s.answers[pair_id] for s in answered):
            continue
        rows.append(
            {
                "pair_id": pair_id,
                "category": pair_category,
                "domain": pair_domain,
                "human_correct": human.correct,
                "human_n": human.answers,
                "missed_by": [s.name for s in answered],
            }
        )
    return rows, sources
