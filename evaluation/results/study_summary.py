"""A study's results with the models beside its humans: what the study's dashboard shows, its JSON summary holds and
the API returns."""

from __future__ import annotations

from evaluation.models import Study
from evaluation.results import beside
from evaluation.studies.reports import paper_row, study_results


def study_summary(study: Study, now=None) -> dict:
    """The study's own results (evaluation.studies.reports.study_results), every model on its items, and a row per
    model in the paper's table (on every sampled item it answered; the tables beside the humans use the shared
    items)."""
    results = study_results(study, now)
    models = beside.study_models(study)
    rows = list(results["paper_table"]["rows"])
    for model in models:
        cells = {c: v["model_all"]["accuracy"] for c, v in model["categories"].items()}
        label = f"{model['name']} (imported)" if model["kind"] == "imported" else model["name"]
        rows.append(paper_row(label, cells, model["model_all_avg"]["accuracy"]))
    return {**results, "models": models, "paper_table": {**results["paper_table"], "rows": rows}}
