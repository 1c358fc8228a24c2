"""Model runs and their results move from the annotator app to evaluation (evaluation.models.runs): the state
only. Their tables keep their names (annotator_modelevaluation, annotator_modelitemresult), so no row is copied and a
populated database moves forward in place; the content types follow them, so admin permissions and history stay."""

import django.db.models.deletion
import django.utils.timezone
import subtlebench.text
from django.conf import settings
from django.db import migrations, models


def move_content_types(apps, schema_editor, *, source, target):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in ("modelevaluation", "modelitemresult"):
        content_type.objects.filter(app_label=source, model=model).update(app_label=target)


def forwards(apps, schema_editor):
    move_content_types(apps, schema_editor, source="annotator", target="evaluation")


def backwards(apps, schema_editor):
    move_content_types(apps, schema_editor, source="evaluation", target="annotator")


class Migration(migrations.Migration):

    dependencies = [
        ("annotator", "0031_sweeps"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("evaluation", "0011_judge_verdicts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ModelEvaluation',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(blank=True, help_text="The model's name, for imported files.", max_length=200, validators=[subtlebench.text.SingleLineValidator()])),
                        ('source', models.CharField(choices=[('release', "a release's split"), ('import', 'an imported results file'), ('export', "an export's split"), ('study', "a study's sample"), ('filter', 'accepted pairs matching a filter')], max_length=10)),
                        ('split', models.CharField(blank=True, max_length=10)),
                        ('study_id', models.PositiveIntegerField(blank=True, db_index=True, help_text='Before releases only: the study whose sample it answered.', null=True)),
                        ('file_name', models.CharField(blank=True, help_text="The imported results file's name.", max_length=300)),
                        ('pair_filter', models.JSONField(blank=True, default=dict)),
                        ('seed', models.IntegerField(default=0)),
                        ('prompt', models.JSONField(blank=True, default=dict, help_text='System prompt and template used, as run.')),
                        ('parameters', models.JSONField(blank=True, default=dict, help_text='temperature, max_tokens, ...')),
                        ('strategy', models.CharField(default='standard', help_text='The prompting strategy, as run.', max_length=20)),
                        ('items', models.PositiveIntegerField(default=0)),
                        ('answered', models.PositiveIntegerField(default=0)),
                        ('correct', models.PositiveIntegerField(default=0)),
                        ('failed', models.PositiveIntegerField(default=0)),
                        ('unparsable', models.PositiveIntegerField(default=0, help_text='Answered items whose reply names no option.')),
                        ('extracted_correct', models.PositiveIntegerField(default=0, help_text='Unparsable items whose extracted letter is the correct one.')),
                        ('prompt_tokens', models.PositiveBigIntegerField(default=0)),
                        ('completion_tokens', models.PositiveBigIntegerField(default=0)),
                        ('paused_since', models.DateTimeField(blank=True, null=True)),
                        ('paused_until', models.DateTimeField(blank=True, null=True)),
                        ('pause_reason', models.TextField(blank=True, max_length=2000)),
                        ('ended', models.CharField(blank=True, choices=[('complete', 'Complete'), ('incomplete', 'Incomplete'), ('failed', 'Failed')], help_text='How the last job of the run ended: every item answered, some not, or most requests failed.', max_length=12)),
                        ('created', models.DateTimeField(default=django.utils.timezone.now)),
                        ('task', models.CharField(choices=[('multiple_choice', 'multiple choice'), ('description', 'description')], default='multiple_choice', help_text='multiple_choice: the questions; description: the model describes the difference and a judge decides whether it matches the human caption.', max_length=20)),
                        ('judge_prompt', models.JSONField(blank=True, default=dict, help_text="The judge's system prompt and template.")),
                        ('circular', models.BooleanField(default=False, help_text='Each item asked once per rotation of its options; right only if right every time.')),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('endpoint', models.ForeignKey(blank=True, help_text='None: imported.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='evaluations', to='annotator.modelendpoint')),
                        ('export_job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='annotator.job')),
                        ('extraction_endpoint', models.ForeignKey(blank=True, help_text='Reads a letter out of the unparsable replies: the second figure, accuracy with LLM extraction.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='extractions', to='annotator.modelendpoint')),
                        ('job', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='model_evaluation', to='annotator.job')),
                        ('judge', models.ForeignKey(blank=True, help_text="The description task's judge: the endpoint that compares each description with the caption.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='judged_runs', to='annotator.modelendpoint')),
                        ('release', models.ForeignKey(blank=True, help_text='None: before releases.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='model_evaluations', to='annotator.release')),
                    ],
                    options={
                        'db_table': 'annotator_modelevaluation',
                        'ordering': ['-created', '-pk'],
                    },
                ),
                migrations.CreateModel(
                    name='ModelItemResult',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('question_id', models.CharField(help_text="The item id, as in the export's records.", max_length=300)),
                        ('category', models.CharField(choices=[('attribute', 'Attribute'), ('state', 'State'), ('emotion', 'Emotion'), ('temporal', 'Temporal'), ('spatial', 'Spatial'), ('existence', 'Existence'), ('quantity', 'Quantity'), ('quality', 'Quality'), ('viewpoint', 'Viewpoint'), ('action', 'Action')], max_length=20)),
                        ('domain', models.CharField(choices=[('natural', 'Natural'), ('gaming', 'Gaming'), ('industrial', 'Industrial'), ('aerial', 'Aerial'), ('medical', 'Medical'), ('synthetic', 'Synthetic')], max_length=20)),
                        ('options', models.JSONField(default=list, help_text='The options in the order sent (A, B, ...).')),
                        ('correct_letter', models.CharField(max_length=1)),
                        ('predicted_letter', models.CharField(blank=True, max_length=1)),
                        ('is_correct', models.BooleanField(help_text='Null when the request failed.', null=True)),
                        ('response_text', models.TextField(blank=True, max_length=20000)),
                        ('parse_outcome', models.CharField(blank=True, choices=[('parsed', 'parsed'), ('unparsable', 'unparsable')], max_length=12)),
                        ('first_response', models.TextField(blank=True, help_text="A two-stage run's description.", max_length=20000)),
                        ('extraction', models.CharField(blank=True, choices=[('letter', 'a letter'), ('none', 'no option'), ('failed', 'request failed')], max_length=8)),
                        ('extracted_letter', models.CharField(blank=True, max_length=1)),
                        ('extraction_text', models.TextField(blank=True, help_text="The extraction endpoint's reply.", max_length=2000)),
                        ('failure', models.CharField(blank=True, choices=[('unreachable', 'Unreachable'), ('unknown_model', 'Unknown Model'), ('timeout', 'Timeout'), ('rate_limited', 'Rate Limited'), ('server_error', 'Server Error'), ('refused', 'host refused'), ('malformed', 'malformed answer'), ('other', 'Other')], max_length=20)),
                        ('failure_message', models.TextField(blank=True, max_length=2000)),
                        ('prompt_tokens', models.PositiveIntegerField(default=0)),
                        ('completion_tokens', models.PositiveIntegerField(default=0)),
                        ('latency_ms', models.PositiveIntegerField(default=0)),
                        ('attempts', models.PositiveSmallIntegerField(default=1, help_text='HTTP attempts of the last ask (backoff).')),
                        ('asks', models.PositiveSmallIntegerField(default=1, help_text='Times the item was asked by the current job (MODEL_EVAL_ITEM_TRIES at most).')),
                        ('created', models.DateTimeField(default=django.utils.timezone.now)),
                        ('judge_text', models.TextField(blank=True, max_length=20000)),
                        ('rotations', models.JSONField(blank=True, default=list)),
                        ('evaluation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='evaluation.modelevaluation')),
                        ('pair', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='model_results', to='annotator.pair')),
                        ('release_item', models.ForeignKey(blank=True, help_text='None: before releases.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='model_results', to='annotator.releaseitem')),
                    ],
                    options={
                        'db_table': 'annotator_modelitemresult',
                        'ordering': ['pk'],
                    },
                ),
                migrations.AlterField(
                    model_name='judgeverdict',
                    name='result',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='human_verdicts', to='evaluation.modelitemresult'),
                ),
                migrations.AddIndex(
                    model_name='modelitemresult',
                    index=models.Index(fields=['pair', 'is_correct'], name='modelitemresult_pair_correct'),
                ),
                migrations.AddConstraint(
                    model_name='modelitemresult',
                    constraint=models.UniqueConstraint(fields=('evaluation', 'question_id'), name='modelitemresult_once_per_item'),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
