"""A coordinator's label for a model run, leading the run's name (evaluation.runs.naming)."""

import subtlebench.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0012_runs_from_annotator")]

    operations = [
        migrations.AddField(
            model_name="modelevaluation",
            name="label",
            field=models.CharField(
                blank=True,
                help_text="A coordinator's name for the run; it leads the run's name (evaluation.runs.naming).",
                max_length=200,
                validators=[subtlebench.text.single_line],
            ),
        ),
    ]
