"""Each finished session gets a completion code of its own and a flag when the whole session went faster than
STUDY_SESSION_MIN_SECONDS_PER_ITEM per answer; open-link sessions keep a keyed hash of the device cookie they joined
with. Sessions finished already are given their code and flag here, by the same rule."""

import secrets

from django.conf import settings
from django.db import migrations, models


def draw_codes_and_flags(apps, schema_editor):
    Participant = apps.get_model("evaluation", "Participant")
    Assignment = apps.get_model("evaluation", "Assignment")
    per_item = settings.STUDY_SESSION_MIN_SECONDS_PER_ITEM
    for participant in Participant.objects.filter(finished_at__isnull=False).order_by("pk").iterator():
        participant.completion_code = secrets.token_hex(6).upper()
        if participant.consented_at:
            answers = Assignment.objects.filter(participant=participant, answered_at__isnull=False).count()
            took = (participant.finished_at - participant.consented_at).total_seconds()
            participant.too_fast = took < answers * per_item
        participant.save(update_fields=["completion_code", "too_fast"])


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0015_retire_runs_before_releases"),
    ]

    operations = [
        migrations.AddField(
            model_name="participant",
            name="completion_code",
            field=models.CharField(blank=True, editable=False, max_length=40),
        ),
        migrations.AddField(
            model_name="participant",
            name="join_device",
            field=models.CharField(
                blank=True,
                help_text="device_key() of the device cookie an open-link session joined with.",
                max_length=32,
            ),
        ),
        migrations.AddField(
            model_name="participant",
            name="too_fast",
            field=models.BooleanField(
                default=False,
                help_text="Finished in under STUDY_SESSION_MIN_SECONDS_PER_ITEM per answer, from consent to the end.",
            ),
        ),
        migrations.AlterField(
            model_name="study",
            name="turned_away",
            field=models.PositiveIntegerField(
                default=0,
                help_text="Open-link arrivals who agreed but found no item left for them (once per browser session); "
                "visits of the consent page alone are not counted.",
            ),
        ),
        migrations.RunPython(draw_codes_and_flags, migrations.RunPython.noop),
    ]
