from django.apps import AppConfig
from django.db.models.signals import post_migrate


def create_role_groups(sender, using, **kwargs):
    """The three role groups exist wherever the schema does: after every migrate (as Django's content types and
    permissions do), and so also after a flush, which sends post_migrate again (a test that flushes the database)."""
    from django.contrib.auth.models import Group

    from subtlebench.roles import ROLES

    for name in ROLES:
        Group.objects.using(using).get_or_create(name=name)


class AnnotatorConfig(AppConfig):
    name = "annotator"

    def ready(self):
        post_migrate.connect(create_role_groups, sender=self, dispatch_uid="annotator.create_role_groups")
        from annotator.jobs.services import jobs_health_part
        from subtlebench.health import health_part_register

        health_part_register("jobs", jobs_health_part)
