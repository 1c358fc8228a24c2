"""The imported results files of studies (evaluation.ModelRun / ModelAnswer) move into the one store of model
answers, as runs from before releases; evaluation 0008 removes their tables after. A migration of its own: rows
written in the transaction of a schema change would hold up its ALTER TABLE (pending trigger events)."""

from django.db import migrations

from benchmark.protocol import LETTERS
from benchmark.records import item_id


def model_runs_into_one_store(apps, schema_editor):
    """Each imported results file of a study (evaluation.ModelRun and its ModelAnswer rows) becomes a run of the
    one store, from before releases: a ModelEvaluation (source import, the study's id kept, a finished Job as
    every run has) with one ModelItemResult per answer, naming the study item's pair and its question id."""
    ModelRun = apps.get_model("evaluation", "ModelRun")
    ModelAnswer = apps.get_model("evaluation", "ModelAnswer")
    Job = apps.get_model("annotator", "Job")
    ModelEvaluation = apps.get_model("annotator", "ModelEvaluation")
    ModelItemResult = apps.get_model("annotator", "ModelItemResult")
    for run in ModelRun.objects.order_by("pk"):
        answers = list(
            ModelAnswer.objects.filter(run=run).select_related("item__pair__video").order_by("pk")
        )
        correct = sum(1 for answer in answers if answer.is_correct)
        job = Job.objects.create(
            kind="model_eval",
            title=f"Import {run.name} on study {run.study_id} (before releases)",
            status="succeeded",
            total=len(answers),
            done=len(answers),
            created=run.created,
            started=run.created,
            finished=run.created,
            result={"total": len(answers), "answered": len(answers), "correct": correct, "failed": 0},
        )
        evaluation = ModelEvaluation.objects.create(
            endpoint=None,
            name=run.name,
            job=job,
            source="import",
            study_id=run.study_id,
            file_name=run.file_name,
            parameters={"model_run": run.pk, "entries": run.entries, "matched": run.matched},
            items=len(answers),
            answered=len(answers),
            correct=correct,
            created=run.created,
        )
        results = []
        for answer in answers:
            pair = answer.item.pair
            predicted = answer.predicted.strip()
            results.append(
                ModelItemResult(
                    evaluation=evaluation,
                    pair=pair,
                    question_id=item_id(
                        category=pair.category,
                        source=pair.source,
                        source_id=pair.source_id,
                        pair_id=pair.pk,
                        yt8m_id=pair.video.yt8m_id if pair.video_id and not pair.source_id else None,
                    ),
                    category=answer.item.category,
                    domain=answer.item.domain,
                    options=[],
                    correct_letter="",
                    predicted_letter=predicted if len(predicted) == 1 and predicted in LETTERS else "",
                    is_correct=answer.is_correct,
                    response_text=answer.predicted,
                    created=run.created,
                )
            )
        ModelItemResult.objects.bulk_create(results)


def one_store_back_into_model_runs(apps, schema_editor):
    """The reverse: the migrated files become ModelRun / ModelAnswer rows again, and leave the one store."""
    ModelRun = apps.get_model("evaluation", "ModelRun")
    ModelAnswer = apps.get_model("evaluation", "ModelAnswer")
    StudyItem = apps.get_model("evaluation", "StudyItem")
    Job = apps.get_model("annotator", "Job")
    ModelEvaluation = apps.get_model("annotator", "ModelEvaluation")
    ModelItemResult = apps.get_model("annotator", "ModelItemResult")
    migrated = ModelEvaluation.objects.filter(source="import", release__isnull=True, study_id__isnull=False)
    for evaluation in migrated.order_by("pk"):
        parameters = evaluation.parameters or {}
        run = ModelRun.objects.create(
            study_id=evaluation.study_id,
            name=evaluation.name,
            file_name=evaluation.file_name,
            entries=parameters.get("entries", evaluation.items),
            matched=evaluation.items,
            created=evaluation.created,
        )
        # Only the columns this step reads: a later migration of the plan may have added others, not applied here.
        items = {
            item.pair_id: item for item in StudyItem.objects.filter(study_id=evaluation.study_id).only("pk", "pair_id")
        }
        ModelAnswer.objects.bulk_create(
            ModelAnswer(run=run, item=items[result.pair_id], predicted=result.response_text, is_correct=bool(result.is_correct))
            for result in ModelItemResult.objects.filter(evaluation=evaluation).order_by("pk")
            if result.pair_id in items
        )
        job_id = evaluation.job_id
        ModelItemResult.objects.filter(evaluation=evaluation).delete()
        evaluation.delete()
        Job.objects.filter(pk=job_id).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('annotator', '0019_model_answers_on_releases'),
        ('evaluation', '0006_total_default_orders'),
    ]

    operations = [
        migrations.RunPython(model_runs_into_one_store, one_store_back_into_model_runs),
    ]
