"""Model runs and their results now belong to the evaluation app (evaluation/migrations/0012): annotator forgets them,
the state only; their tables stay as they are, now evaluation's."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("annotator", "0031_sweeps"),
        ("evaluation", "0012_runs_from_annotator"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="modelitemresult", name="evaluation"),
                migrations.RemoveField(model_name="modelitemresult", name="pair"),
                migrations.RemoveField(model_name="modelitemresult", name="release_item"),
                migrations.DeleteModel(name="ModelEvaluation"),
                migrations.DeleteModel(name="ModelItemResult"),
            ],
            database_operations=[],
        )
    ]
