"""A populated database from before model runs moved to the evaluation app (annotator 0031, evaluation 0011) migrates
forward in place: the same rows in the same tables, now evaluation's models, a judge's verdict still pointing at its
result, the content types (and so admin permissions) moved with them; and back again."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.database_template import database_at, migrate

BEFORE = [("annotator", "0031_sweeps"), ("evaluation", "0011_judge_verdicts")]
AFTER = [("annotator", "0032_runs_to_evaluation"), ("evaluation", "0012_runs_from_annotator")]


@pytest.mark.django_db(transaction=True)
def test_a_populated_database_moves_its_model_runs_to_evaluation_in_place():
    with database_at(BEFORE):
        old = migrate(BEFORE)
        Job, Endpoint, Evaluation, Result = (
            old.get_model("annotator", name) for name in ("Job", "ModelEndpoint", "ModelEvaluation", "ModelItemResult")
        )
        ContentType = old.get_model("contenttypes", "ContentType")
        Verdict = old.get_model("evaluation", "JudgeVerdict")
        User = old.get_model("auth", "User")
        person = User.objects.create(username="checker")
        endpoint = Endpoint.objects.create(name="tiny", base_url="http://gpu/v1", model_id="m")
        job = Job.objects.create(kind="model_eval", title="Run tiny", status="succeeded")
        run = Evaluation.objects.create(endpoint=endpoint, job=job, source="release", items=2, answered=2, correct=1)
        right = Result.objects.create(
            evaluation=run, question_id="q1", category="state", domain="natural", correct_letter="A", is_correct=True
        )
        Result.objects.create(
            evaluation=run, question_id="q2", category="state", domain="natural", correct_letter="B", is_correct=False
        )
        Verdict.objects.create(result=right, reviewer=person, matches=True)
        for model in ("modelevaluation", "modelitemresult"):
            ContentType.objects.get_or_create(app_label="annotator", model=model)
        type_ids = dict(ContentType.objects.filter(app_label="annotator").values_list("model", "pk"))

        new = migrate(AFTER)
        Evaluation, Result = (new.get_model("evaluation", name) for name in ("ModelEvaluation", "ModelItemResult"))
        Verdict = new.get_model("evaluation", "JudgeVerdict")
        ContentType = new.get_model("contenttypes", "ContentType")
        moved = Evaluation.objects.get(pk=run.pk)
        assert (moved.endpoint_id, moved.job_id, moved.items, moved.correct) == (endpoint.pk, job.pk, 2, 1)
        assert list(
            Result.objects.filter(evaluation=moved).order_by("pk").values_list("question_id", "is_correct")
        ) == [
            ("q1", True),
            ("q2", False),
        ]
        assert Verdict.objects.get().result.question_id == "q1"
        tables = connection.introspection.table_names()
        assert "annotator_modelevaluation" in tables and "evaluation_modelevaluation" not in tables
        assert dict(
            ContentType.objects.filter(app_label="evaluation", model__startswith="model").values_list("model", "pk")
        ) == {"modelevaluation": type_ids["modelevaluation"], "modelitemresult": type_ids["modelitemresult"]}

        back = migrate(BEFORE)
        assert back.get_model("annotator", "ModelItemResult").objects.filter(evaluation_id=run.pk).count() == 2
        assert back.get_model("contenttypes", "ContentType").objects.get(pk=type_ids["modelevaluation"]).app_label == (
            "annotator"
        )
