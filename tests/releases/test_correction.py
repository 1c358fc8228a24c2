"""Correcting a pair after its release changes none of the three outputs that stand on the release: the study drawn
from it (what participants see and how they are scored), the model run on it, and its report (every byte)."""

from __future__ import annotations

import pytest

from demo.releases import demo_results_file
from evaluation.models import ModelItemResult
from evaluation.results.release_report import release_report_of
from evaluation.results.report import release_report_files
from evaluation.runs.results_files import model_results_import
from evaluation.runs.selectors import model_answers_on_release
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.releases.test_diff import attribute_pair, correct, publish

pytestmark = pytest.mark.django_db


def test_a_pair_corrected_after_the_release_leaves_the_study_the_model_run_and_the_report_unchanged(
    tmp_path, coordinator
):
    pairs = [attribute_pair() for _ in range(6)]
    release = publish(tmp_path / "v1")
    study = studies.study_create(name="On v1", release=release, fraction=1.0, raters_per_item=1, practice_count=0)
    for seed in (1, 2):
        participant = studies.participant_create(study=study)
        participation.participant_answer_all(participant=participant, accuracy=0.5, seed=seed)
    run = model_results_import(
        user=coordinator, release=release, name="guesser", content=demo_results_file(release, accuracy=0.5)
    )

    def outputs() -> dict:
        items = study.items.scored().order_by("position", "pk")
        return {
            "shown": [(item.presented().question, item.presented().options) for item in items],
            "scored": sorted(study.items.scored().values_list("assignments__pk", "assignments__correct")),
            "model": sorted(ModelItemResult.objects.filter(evaluation=run).values_list("question_id", "is_correct")),
            "model_answers": model_answers_on_release(release),
            "report": release_report_files(release_report_of(release)),
        }

    before = outputs()
    corrected = pairs[0]
    correct(corrected, coordinator, question="What is the new colour of the cup?", answer="green")
    corrected.refresh_from_db()
    assert (corrected.question, corrected.answer) == ("What is the new colour of the cup?", "green")
    # A fresh read of every row: nothing of the release's outputs moved with the pair.
    study.refresh_from_db()
    after = outputs()
    assert after == before
    assert ("Which colour did the cup by the window turn?", ("red", "blue")) in after["shown"]
    assert all(question != corrected.question for question, _ in after["shown"])
