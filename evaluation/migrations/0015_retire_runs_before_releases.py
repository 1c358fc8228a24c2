"""Runs are started on a release's split only: every run whose items came from an export folder, a study's sample or
a pair filter becomes an imported run before releases. Its answers, endpoint, study and pair links are kept, its old
source is kept in `parameters["retired_source"]` (the reverse restores it), and a job still queued or running for it
is failed with the reason, so that nothing asks its items again."""

from django.db import migrations, models
from django.utils import timezone

RETIRED = ("export", "study", "filter")
ACTIVE_JOB = ("queued", "running")
ACTIVE_UNIT = ("pending", "queued", "running")
REASON = (
    "This run's items predate releases: it is kept as an imported run (its answers stay readable) and is not run "
    "again; start a run on a release's split instead."
)


def retire(apps, schema_editor):
    Evaluation = apps.get_model("evaluation", "ModelEvaluation")
    JobTask = apps.get_model("annotator", "JobTask")
    now = timezone.now()
    for run in Evaluation.objects.filter(source__in=RETIRED).order_by("pk"):
        run.parameters = {**(run.parameters or {}), "retired_source": run.source}
        run.source = "import"
        stopped = run.paused_until is not None or run.job.status in ACTIVE_JOB
        if stopped:
            run.ended = "failed"
            run.paused_since = run.paused_until = None
            run.pause_reason = ""
        run.save(update_fields=["parameters", "source", "ended", "paused_since", "paused_until", "pause_reason"])
        job = run.job
        if job.status in ACTIVE_JOB:
            job.status = "failed"
            job.errors = [*(job.errors or []), REASON]
            job.finished = now
            job.save(update_fields=["status", "errors", "finished"])
        JobTask.objects.filter(job=job, status__in=ACTIVE_UNIT).update(status="failed", error=REASON, token="")


def restore(apps, schema_editor):
    Evaluation = apps.get_model("evaluation", "ModelEvaluation")
    for run in Evaluation.objects.filter(source="import", parameters__has_key="retired_source").order_by("pk"):
        parameters = dict(run.parameters)
        run.source = parameters.pop("retired_source")
        run.parameters = parameters
        run.save(update_fields=["source", "parameters"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotator", "0033_endpoint_request_profiles"),
        ("evaluation", "0014_run_request_settings"),
    ]

    operations = [
        migrations.RunPython(retire, restore),
        migrations.AlterField(
            model_name="modelevaluation",
            name="source",
            field=models.CharField(
                choices=[("release", "a release's split"), ("import", "an imported results file")], max_length=10
            ),
        ),
    ]
