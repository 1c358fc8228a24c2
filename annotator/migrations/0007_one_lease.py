"""One lease for videos and caption tasks (annotator.models.leases.Leasable): the same three fields on both, and
at most one held row per annotator and model, enforced by a partial unique constraint."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# Before the constraint: an annotator who holds several rows (expired or not; the old workbench let one hold two
# videos) keeps the one whose lease runs longest, the others become free.
KEEP_ONE_LEASE_PER_HOLDER = """
UPDATE {table} SET lease_holder_id = NULL, lease_heartbeat = NULL, lease_expires = NULL
WHERE id IN (
    SELECT id FROM (
        SELECT id, row_number() OVER (
            PARTITION BY lease_holder_id ORDER BY lease_expires DESC NULLS LAST, id DESC
        ) AS rank
        FROM {table} WHERE lease_holder_id IS NOT NULL
    ) AS ranked
    WHERE rank > 1
)
"""


class Migration(migrations.Migration):
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("annotator", "0006_embedding_model"),
    ]

    operations = [
        migrations.RenameField(model_name="video", old_name="leased_to", new_name="lease_holder"),
        migrations.AlterField(
            model_name="video",
            name="lease_holder",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="%(class)s_leases",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="video",
            name="lease_heartbeat",
            field=models.DateTimeField(blank=True, help_text="When the holder last renewed it.", null=True),
        ),
        migrations.RenameField(model_name="captiontask", old_name="leased_by", new_name="lease_holder"),
        migrations.RenameField(model_name="captiontask", old_name="leased_until", new_name="lease_expires"),
        migrations.AlterField(
            model_name="captiontask",
            name="lease_holder",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="%(class)s_leases",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="captiontask",
            name="lease_expires",
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name="captiontask",
            name="lease_heartbeat",
            field=models.DateTimeField(blank=True, help_text="When the holder last renewed it.", null=True),
        ),
        migrations.RunSQL(KEEP_ONE_LEASE_PER_HOLDER.format(table="annotator_video"), migrations.RunSQL.noop),
        migrations.RunSQL(KEEP_ONE_LEASE_PER_HOLDER.format(table="annotator_captiontask"), migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name="video",
            constraint=models.UniqueConstraint(
                condition=models.Q(("lease_holder__isnull", False)),
                fields=("lease_holder",),
                name="video_one_lease_per_holder",
            ),
        ),
        migrations.AddConstraint(
            model_name="captiontask",
            constraint=models.UniqueConstraint(
                condition=models.Q(("lease_holder__isnull", False)),
                fields=("lease_holder",),
                name="captiontask_one_lease_per_holder",
            ),
        ),
    ]
