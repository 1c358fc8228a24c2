"""Humans beside the models: each model's answers (evaluation.results.compare, the one store) set against the
humans' answers on the same items.

A model is a registered endpoint evaluated in the app or an imported results file. Both are matched to the
humans by pair within the study's release (a study item is its pair, and a result names its release item and
pair); before releases, by pair across runs. An endpoint's answer to a pair is its latest answer, as for "models
correct k of n" on the pair; failed requests are no answer, so they count neither as right nor as wrong.
"""

from __future__ import annotations

from collections import defaultdict

from annotator.models import CATEGORY_ABBREVIATIONS, Category, Domain, Pair
from evaluation.models import Assignment, Study, StudyItem
from evaluation.results.compare import ModelSource, app_sources, imported_sources, model_sources
from evaluation.studies import metrics

CATEGORIES = [str(c) for c in Category.values]
DOMAINS = [str(d) for d in Domain.values]


def study_sources(study: Study, pair_ids) -> list[ModelSource]:
    """The models to set beside a study's humans: on a study of a release, the runs on that release; before
    releases, every endpoint's latest answers and the files imported into the study."""
    release_id = getattr(study, "release_id", None)
    if release_id is not None:
        return model_sources(pair_ids, release_id=release_id)
    return app_sources(pair_ids) + imported_sources(pair_ids, study_id=study.pk)


def human_answers(study: Study | None = None) -> dict[int, list[bool]]:
    """The humans' scored answers by pair id (practice and attention checks left out)."""
    rows = Assignment.objects.filter(answered_at__isnull=False, item__kind=StudyItem.Kind.SCORED)
    if study is not None:
        rows = rows.filter(item__study=study)
    by_pair: dict[int, list[bool]] = defaultdict(list)
    for pair_id, correct in rows.values_list("item__pair_id", "correct"):
        by_pair[pair_id].append(bool(correct))
    return by_pair


def strata_of(study: Study | None, pair_ids) -> dict[int, tuple[str, str]]:
    """Category and domain by pair: a study's frozen strata, else the pairs' own."""
    if study is not None:
        items = study.items.scored().values_list("pair_id", "category", "domain")
        return {pair_id: (category, domain) for pair_id, category, domain in items}
    pairs = Pair.objects.filter(pk__in=list(pair_ids)).values_list("pk", "category", "domain")
    return {pk: (category, domain) for pk, category, domain in pairs}


def _group(names, key_of, pairs, answers, humans, *, abbr=False) -> dict[str, dict]:
    out = {}
    for name in names:
        mine = [p for p in pairs if key_of(p) == name]
        if not mine:
            continue
        same = [p for p in mine if p in humans]
        model_all = metrics.proportion(sum(answers[p] for p in mine), len(mine))
        model = metrics.proportion(sum(answers[p] for p in same), len(same))
        human = metrics.proportion(sum(sum(humans[p]) for p in same), sum(len(humans[p]) for p in same))
        difference = human["accuracy"] - model["accuracy"] if same else None
        out[name] = {"model_all": model_all, "model": model, "human": human, "difference": difference}
        if abbr:
            out[name]["abbr"] = CATEGORY_ABBREVIATIONS[name]
    return out


def compare(sources: list[ModelSource], humans: dict[int, list[bool]], strata: dict[int, tuple[str, str]]) -> list:
    """Per model, per category and per domain: the model on every item it answered (`model_all`), and the model
    and the humans on the items both answered (`model`, `human`, `difference` = human - model), each with its
    Wilson 95% interval; AVG is the macro mean over categories, as in the paper."""
    out = []
    for source in sources:
        pairs = [p for p in source.answers if p in strata]
        answers = source.answers
        categories = _group(CATEGORIES, lambda p: strata[p][0], pairs, answers, humans, abbr=True)
        domains = _group(DOMAINS, lambda p: strata[p][1], pairs, answers, humans)
        same = [p for p in pairs if p in humans]

        def avg(side: str, group=categories) -> dict:
            return metrics.macro([(g[side]["correct"], g[side]["n"]) for g in group.values()])

        model_avg, human_avg = avg("model"), avg("human")
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
                "model_all": metrics.proportion(sum(answers[p] for p in pairs), len(pairs)),
                "model_all_avg": avg("model_all"),
                "model_avg": model_avg,
                "human_avg": human_avg,
                "difference": (human_avg["accuracy"] - model_avg["accuracy"]) if same else None,
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


def human_majority_right(answers: list[bool]) -> bool:
    """The humans got an item right when more than half of its human answers are right."""
    return sum(answers) * 2 > len(answers)


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
        if not human or not human_majority_right(human):
            continue
        pair_category, pair_domain = strata[pair_id]
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
                "human_correct": sum(human),
                "human_n": len(human),
                "missed_by": [s.name for s in answered],
            }
        )
    return rows, sources
