"""Demo data for `make run`: users, videos, similarities, pairs, release v1 with a study and a model run on it, and
captions. Safe to re-run."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from demo.captions import seed_demo_captions
from demo.pairs import seed_demo_pairs
from demo.releases import seed_demo_model_run, seed_demo_publication, seed_demo_release
from demo.similarity import DemoModelUnusable, report_demo_similarity, seed_demo_similarity
from demo.studies import seed_demo_study
from demo.videos import demo_videos_seed

DEMO_USERS = {
    "coordinator": ("coordinator", "reviewer"),
    "annotator1": ("annotator",),
    "annotator2": ("annotator",),
    "reviewer": ("reviewer", "annotator"),
}


def seed_demo_users() -> None:
    """The demo cast, password 'demo'; the role groups are made if missing (e.g. after `manage.py flush`)."""
    for username, roles in DEMO_USERS.items():
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_password("demo")
            user.is_staff = username == "coordinator"
            user.is_superuser = username == "coordinator"
            user.save()
        user.groups.add(*(Group.objects.get_or_create(name=role)[0] for role in roles))


class Command(BaseCommand):
    help = "Create demo users, videos, pairs, release v1 with a study and a model run on it, captions (safe to re-run)."

    def handle(self, *args, **options):
        seed_demo_users()
        self.stdout.write(f"Demo users: {', '.join(DEMO_USERS)} (password 'demo').")
        demo_videos_seed()
        try:
            seed_demo_similarity(self.stdout)
        except DemoModelUnusable as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"Demo pairs: {seed_demo_pairs()} made (drafts, submitted, accepted, rejected).")
        report_demo_similarity(self.stdout)
        release = seed_demo_release(self.stdout)
        seed_demo_study(self.stdout)
        seed_demo_publication(release, self.stdout)
        seed_demo_model_run(release, self.stdout)
        seed_demo_captions(self.stdout)
