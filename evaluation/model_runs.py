"""Model evaluation runs started from any source, a study's sample included (annotator does not import evaluation,
so a study's pairs are gathered here and handed down to annotator.modeleval)."""

from __future__ import annotations

from annotator.modeleval.services import evaluation_start
from annotator.models import ModelEndpoint, ModelEvaluation
from evaluation.models import Study
from subtlebench.errors import Invalid


def study_pair_ids(study: Study) -> list[int]:
    """The pairs of a study's scored sample, in the sample's order."""
    return list(study.items.scored().order_by("position", "pk").values_list("pair_id", flat=True))


def model_run_start(
    *, endpoint: ModelEndpoint, user, source: str, study: Study | None = None, **fields
) -> ModelEvaluation:
    """Start a run on an export's split, a study's sample or the accepted pairs matching a filter."""
    if source == ModelEvaluation.Source.STUDY:
        if study is None:
            raise Invalid({"study": ["Name the study whose sample to evaluate."]})
        fields.update(study_id=study.pk, pair_ids=study_pair_ids(study))
    return evaluation_start(endpoint=endpoint, user=user, source=source, **fields)
